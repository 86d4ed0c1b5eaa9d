#!/usr/bin/env bash
# Fetches Debian's newest unmodified Linux kernel of one suite for one guest architecture into
# the project cache with private apt directories (nothing on the system changes). The ABI is
# resolved through the meta package linux-image-<debarch>, never hard-coded; --release names one
# kernel build instead (the release uname -r prints, with or without the architecture suffix:
# the package linux-image-<release>, from any of the suite's archives that still holds it; the
# tests boot the build their references were recorded on this way). Only what a boot
# needs is kept: the vmlinuz (x86_64: bzImage; arm64: raw Image) and the config; the .debs are
# removed. Idempotent: a verified cache is reused unless --refresh is given. Prints the vmlinuz
# path; download progress goes to stderr.
#
#   guest-images/fetch-kernel.sh [--refresh] [--suite SUITE] [--release RELEASE] x86_64|arm64
#   guest-images/fetch-kernel.sh --resolve [--suite SUITE] [--release RELEASE] x86_64|arm64
#       what the mirror has now: prints package=, version=, release=, suite= (updates private
#       lists; downloads no .deb)
#   SUITE: bookworm, trixie, stable, oldstable, sid (= unstable), <stable suite>-backports;
#          default: the machine's own suite (/etc/os-release)
#   cache: ${KPEMU_CACHE:-<repo>/.cache}/guest/<suite>/<arch>/{vmlinuz,config,version}
#          (the host suite's files are also linked from guest/<arch>/, the older layout);
#          with --release: guest/<suite>@<release without -amd64/-arm64>/<arch>/
#   exit: 0 done, 1 error (network, mirror, package; a release the suite no longer holds),
#         2 usage (unknown suite or option, a malformed release)
set -euo pipefail
prog=fetch-kernel
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"

parse_suite=1
parse_arch_args 2,22 "$@"
debarch=$(debarch_of "$arch")
case "$debarch" in amd64) arch=x86_64 ;; arm64) arch=arm64 ;; esac
host=$(host_suite)
suite=$(normalize_suite "${suite:-$host}")
guest=${KPEMU_CACHE:-$root/.cache}/guest
[ -z "$want_release" ] || { want_release=$(full_release "$want_release" "$debarch") || exit 2; }
cache=$(kernel_cache_dir "$guest" "$suite" "$arch" "$debarch" "$want_release") || exit 2
legacy=$guest/$arch          # the layout before suites: the host suite's kernel, still read by older callers
stamp="$cache/.kernel-verified"

# Checks the unpacked kernel really is a kernel of the expected architecture.
verify() {
  local f=$cache/vmlinuz
  [ -s "$f" ] && [ -s "$cache/config" ] && [ -s "$cache/version" ] || return 1
  case "$debarch" in
    amd64) [ "$(dd if="$f" bs=1 skip=514 count=4 2>/dev/null)" = "HdrS" ] ;;   # bzImage setup header
    arm64) [ "$(dd if="$f" bs=1 skip=56 count=3 2>/dev/null)" = "ARM" ] \
             && [ "$(od -An -tx1 -j59 -N1 "$f" | tr -d ' ')" = "64" ] ;;       # Image magic ARM\x64
  esac
}

# guest/<arch>/{vmlinuz,config,version} -> ../<host suite>/<arch>/... (replaced atomically).
link_legacy() {
  [ "$suite" = "$host" ] && [ -z "$want_release" ] || return 0
  mkdir -p "$legacy"
  local f
  for f in vmlinuz config version; do
    ln -sfn "../$suite/$arch/$f" "$legacy/.$f.link"
    mv -Tf "$legacy/.$f.link" "$legacy/$f"
  done
}

# Migration from the older layout: the host suite's kernel in guest/<arch>/ moves (hard links,
# no download) to guest/<host suite>/<arch>/, with its decompressed x86 vmlinux.
if [ $refresh = 0 ] && [ $resolve_only = 0 ] && [ "$suite" = "$host" ] && [ -z "$want_release" ] && [ ! -f "$stamp" ] \
   && [ -f "$legacy/.kernel-verified" ] && [ -f "$legacy/vmlinuz" ] && [ ! -L "$legacy/vmlinuz" ]; then
  mkdir -p "$cache"
  for f in vmlinuz config version vmlinux; do
    [ -f "$legacy/$f" ] && ln -f "$legacy/$f" "$cache/$f"
  done
  grep -q '^suite=' "$cache/version" 2>/dev/null || { cp "$cache/version" "$cache/version.tmp"; echo "suite=$suite" >> "$cache/version.tmp"; mv -f "$cache/version.tmp" "$cache/version"; }
  if verify; then touch "$stamp"; link_legacy; echo "$prog: moved the cached $suite kernel from $legacy to $cache" >&2; fi
fi

if [ $refresh = 0 ] && [ $resolve_only = 0 ] && [ -f "$stamp" ] && verify; then echo "$cache/vmlinuz"; exit 0; fi

# A release the suite's newest (already cached) is: hard links, no download.
newest=$guest/$suite/$arch
if [ -n "$want_release" ] && [ $resolve_only = 0 ] && [ -f "$newest/.kernel-verified" ] \
   && grep -qx "release=$want_release" "$newest/version" 2>/dev/null; then
  mkdir -p "$cache"
  # the version file is copied: a later fetch of the newest rewrites its own in place
  cp "$newest/version" "$cache/version.tmp" && mv -f "$cache/version.tmp" "$cache/version"
  for f in vmlinuz config vmlinux; do
    [ -f "$newest/$f" ] && ln -f "$(readlink -f "$newest/$f")" "$cache/$f.tmp" && mv -f "$cache/$f.tmp" "$cache/$f"
  done
  if verify; then touch "$stamp"; echo "$cache/vmlinuz"; exit 0; fi
fi

if [ $resolve_only = 0 ]; then mkdir -p "$cache"; work="$cache/apt"
else work=$(mktemp -d "${TMPDIR:-/tmp}/kpemu-resolve.XXXXXX"); fi
apt_setup "$work" "$debarch" "$suite"
[ $resolve_only = 0 ] || trap 'rm -rf "$work"' EXIT
apt_update
meta=linux-image-$debarch
# The meta package's candidate (newest) version depends on exactly one linux-image-<abi>-<arch>.
newest_pkg=$(apt-cache "${aptopts[@]}" depends --no-recommends --no-suggests "$meta" 2>/dev/null \
        | awk '$1=="Depends:" {print $2}' | grep -E "^linux-image-[0-9].*-$debarch\$" | sort -V | tail -n1 || true)
candidate() { apt-cache "${aptopts[@]}" policy "$1" 2>/dev/null | awk '$1=="Candidate:" {print $2; exit}'; }
if [ -n "$want_release" ]; then
  pkg=linux-image-$want_release
  c=$(candidate "$pkg")
  [ -n "$c" ] && [ "$c" != "(none)" ] \
    || die "Debian $apt_suite no longer has $pkg (its newest is ${newest_pkg:-unknown}); a kernel build leaves the archive when the suite moves on"
else
  pkg=$newest_pkg
  [ -n "$pkg" ] || die "cannot resolve $meta to a linux-image-<abi>-$debarch package in Debian $apt_suite"
fi
abi=${pkg#linux-image-}
if [ $resolve_only = 1 ]; then
  echo "package=$pkg"
  echo "version=$(candidate "$pkg")"
  echo "release=$abi"
  echo "suite=$suite"
  exit 0
fi

t0=$(date +%s)
deb=$(apt_download "$pkg")
ver=$(dpkg-deb -f "$deb" Version)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$debarch" ] || die "$deb is not an $debarch package"
size=$(stat -c %s "$deb")
ex="$work/extract"; rm -rf "$ex"; mkdir -p "$ex"
listing=$(dpkg-deb -c "$deb")
if grep -q ' \./boot/vmlinuz-' <<<"$listing"; then
  # Debian 12 and 13: the image package holds /boot/vmlinuz-<abi> and /boot/config-<abi>
  # (extract only those; the modules are not needed to boot).
  layout=boot
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$ex" --wildcards './boot/vmlinuz-*' './boot/config-*' 2>"$work/tar.log" \
    || die "$deb holds no /boot/vmlinuz-* and /boot/config-*; see $work/tar.log"
  vmlinuz=$(ls "$ex"/boot/vmlinuz-* | head -n1); config=$(ls "$ex"/boot/config-* | head -n1)
  release=${vmlinuz##*/vmlinuz-}
else
  # Debian unstable (7.x): linux-image-<abi> is empty and depends on linux-binary-<abi>
  # (/usr/lib/modules/<abi>/vmlinuz) and linux-base-<abi> (/usr/lib/modules/<abi>/config).
  layout=modules
  for part in binary base; do
    p=$(apt-cache "${aptopts[@]}" depends "$pkg" 2>/dev/null | awk '$1=="Depends:" {print $2}' | grep -E "^linux-$part-" | head -n1 || true)
    [ -n "$p" ] || die "$pkg has no /boot/vmlinuz-* and depends on no linux-$part-<abi> package"
    d=$(apt_download "$p")
    size=$((size + $(stat -c %s "$d")))
    dpkg-deb --fsys-tarfile "$d" | tar -x -C "$ex" --wildcards './usr/lib/modules/*/vmlinuz' './usr/lib/modules/*/config' 2>/dev/null || true
  done
  vmlinuz=$(ls "$ex"/usr/lib/modules/*/vmlinuz 2>/dev/null | head -n1 || true)
  config=$(ls "$ex"/usr/lib/modules/*/config 2>/dev/null | head -n1 || true)
  [ -n "$vmlinuz" ] || die "neither $pkg nor its linux-binary package holds a vmlinuz"
  [ -n "$config" ] || die "no /usr/lib/modules/<abi>/config in the linux-base package of $pkg"
  release=$(basename "$(dirname "$vmlinuz")")
fi
t1=$(date +%s)
[ -z "$want_release" ] || [ "$release" = "$want_release" ] || die "$pkg holds kernel $release, not $want_release"
rm -f "$stamp"
mv -f "$vmlinuz" "$cache/vmlinuz"
mv -f "$config" "$cache/config"
rm -f "$cache/vmlinux"       # derived from the previous vmlinuz (GuestImages.vmlinux rewrites it)
{
  echo "package=$pkg"
  echo "version=$ver"
  echo "release=$release"
  echo "arch=$arch"
  echo "suite=$suite"
  echo "layout=$layout"
  echo "deb-bytes=$size"
  echo "download-seconds=$((t1 - t0))"
} > "$cache/version"
verify || die "unpacked $cache/vmlinuz is not a valid $arch kernel image"
touch "$stamp"
rm -rf "$work"               # the .debs, the lists and the extraction directory
link_legacy
echo "$cache/vmlinuz"
