#!/usr/bin/env bash
# Fetches the kernel modules of the Debian kernel that fetch-kernel.sh cached for one suite and
# one guest architecture: the same package at the same version (a module only loads into the
# kernel build it was made for), unpacked with private apt directories (nothing on the system
# changes). Keeps lib/modules/<release>/ (the .ko files as Debian ships them, compressed or not,
# with modules.builtin where the package has it; Debian writes modules.dep at install time with depmod,
# so kpemu resolves dependencies from each module's own .modinfo) and prints that directory.
# Idempotent.
#
#   guest-images/fetch-modules.sh [--suite SUITE] [--release RELEASE] x86_64|arm64
#   cache: ${KPEMU_CACHE:-<repo>/.cache}/guest/<suite>/<arch>/modules/<release>/
#          (--release: the kernel fetch-kernel.sh --release cached, in guest/<suite>@<release>/)
#   exit: 0 done, 1 error (no cached kernel, the mirror no longer has that version, network),
#         2 usage
set -euo pipefail
prog=fetch-modules
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"

parse_suite=1
parse_arch_args 2,15 "$@"
debarch=$(debarch_of "$arch")
case "$debarch" in amd64) arch=x86_64 ;; arm64) arch=arm64 ;; esac
suite=$(normalize_suite "${suite:-$(host_suite)}")
cache=$(kernel_cache_dir "${KPEMU_CACHE:-$root/.cache}/guest" "$suite" "$arch" "$debarch" "$want_release") || exit 2
[ -f "$cache/version" ] || die "no $suite${want_release:+ $want_release} $arch kernel in the cache; fetch it first: guest-images/fetch-kernel.sh --suite $suite${want_release:+ --release $want_release} $arch"
field() { awk -F= -v k="$1" '$1==k {print substr($0, length(k) + 2); exit}' "$cache/version"; }
pkg=$(field package); ver=$(field version); release=$(field release)
[ -n "$pkg" ] && [ -n "$ver" ] && [ -n "$release" ] || die "$cache/version lacks package=, version= or release="
dest=$cache/modules/$release
stamp=$dest/.modules-verified
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkg=$ver" ] && [ -d "$dest/kernel" ]; then echo "$dest"; exit 0; fi

# The same build's modules, already unpacked for the suite's newest kernel: hard links, no download.
newest=${KPEMU_CACHE:-$root/.cache}/guest/$suite/$arch/modules/$release
if [ -n "$want_release" ] && [ -f "$newest/.modules-verified" ] && [ "$(cat "$newest/.modules-verified")" = "$pkg=$ver" ]; then
  rm -rf "$dest.tmp"; mkdir -p "$(dirname "$dest")"
  cp -al "$newest" "$dest.tmp" && rm -rf "$dest" && mv "$dest.tmp" "$dest" && { echo "$dest"; exit 0; }
fi

work="$cache/modules-apt"
apt_setup "$work" "$debarch" "$suite"
trap 'rm -rf "$work"' EXIT
apt_update
have=$(apt-cache "${aptopts[@]}" madison "$pkg" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -Fx "$ver" || true)
[ -n "$have" ] || die "Debian $suite no longer has $pkg $ver (the cached kernel); refresh the kernel and its modules together: guest-images/fetch-kernel.sh --refresh --suite $suite $arch"

# Debian 12 and 13 ship the modules in the image package; unstable's image package is empty and
# depends on linux-modules-<abi> (the .ko files), linux-binary-<abi> (the vmlinuz) and
# linux-base-<abi> (config, modules.builtin).
debs=("$(apt_download "$pkg=$ver")")
listing=$(dpkg-deb -c "${debs[0]}")
if ! grep -q "/modules/$release/kernel/" <<<"$listing"; then
  while read -r dep; do
    [ -n "$dep" ] || continue
    debs+=("$(apt_download "$dep=$ver")")   # built from the same source: the same version
  done < <(apt-cache "${aptopts[@]}" depends "$pkg=$ver" 2>/dev/null | awk '$1=="Depends:" {print $2}' | grep -E '^linux-(modules|base)-' || true)
fi
ex="$work/extract"; rm -rf "$ex"; mkdir -p "$ex"
for d in "${debs[@]}"; do
  dpkg-deb --fsys-tarfile "$d" | tar -x -C "$ex" --wildcards "./lib/modules/$release/*" "./usr/lib/modules/$release/*" 2>/dev/null || true
done
src=""
for c in "$ex/lib/modules/$release" "$ex/usr/lib/modules/$release"; do
  [ -d "$c/kernel" ] && { src=$c; break; }
done
[ -n "$src" ] || die "no lib/modules/$release/kernel/ in ${debs[*]}"
[ "$src" = "$ex/lib/modules/$release" ] || [ ! -d "$ex/lib/modules/$release" ] || cp -a "$ex/lib/modules/$release/." "$src/"
rm -rf "$dest"; mkdir -p "$(dirname "$dest")"
mv "$src" "$dest"
echo "$pkg=$ver" > "$stamp"
echo "$dest"
