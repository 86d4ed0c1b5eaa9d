#!/usr/bin/env bash
# Fetches Debian's newest unmodified Linux kernel for one guest architecture into the project
# cache with private apt directories (nothing on the system changes). The ABI is resolved
# through the meta package linux-image-<debarch>, never hard-coded. Only what a boot needs is
# kept: the vmlinuz (x86_64: bzImage; arm64: raw Image) and the config; the .deb is removed.
# Idempotent: a verified cache is reused unless --refresh is given. Prints the vmlinuz path.
#
#   guest-images/fetch-kernel.sh [--refresh] x86_64|arm64
#   cache: ${KPEMU_CACHE:-<repo>/.cache}/guest/<arch>/{vmlinuz,config,version}
set -euo pipefail
prog=fetch-kernel
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"

parse_arch_args 2,10 "$@"
debarch=$(debarch_of "$arch")
case "$debarch" in amd64) arch=x86_64 ;; arm64) arch=arm64 ;; esac
cache=${KPEMU_CACHE:-$root/.cache}/guest/$arch
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

if [ $refresh = 0 ] && [ -f "$stamp" ] && verify; then echo "$cache/vmlinuz"; exit 0; fi

mkdir -p "$cache"
apt_setup "$cache/apt" "$debarch"
apt_update
meta=linux-image-$debarch
# The meta package's candidate (newest) version depends on exactly one linux-image-<abi>-<arch>.
pkg=$(apt-cache "${aptopts[@]}" depends --no-recommends --no-suggests "$meta" 2>/dev/null \
        | awk '$1=="Depends:" {print $2}' | grep -E "^linux-image-[0-9].*-$debarch\$" | sort -V | tail -n1 || true)
[ -n "$pkg" ] || die "cannot resolve $meta to a linux-image-<abi>-$debarch package in Debian $apt_suite"
t0=$(date +%s)
deb=$(apt_download "$pkg")
t1=$(date +%s)
ver=$(dpkg-deb -f "$deb" Version)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$debarch" ] || die "$deb is not an $debarch package"
size=$(stat -c %s "$deb")

# Extract only /boot/vmlinuz-* and /boot/config-* (the modules are not needed to boot).
ex="$cache/apt/extract"; rm -rf "$ex"; mkdir -p "$ex"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$ex" --wildcards './boot/vmlinuz-*' './boot/config-*' 2>"$cache/apt/tar.log" \
  || die "$deb holds no /boot/vmlinuz-* and /boot/config-*; see $cache/apt/tar.log"
vmlinuz=$(ls "$ex"/boot/vmlinuz-* | head -n1); config=$(ls "$ex"/boot/config-* | head -n1)
release=${vmlinuz##*/vmlinuz-}
rm -f "$stamp"
mv -f "$vmlinuz" "$cache/vmlinuz"
mv -f "$config" "$cache/config"
{
  echo "package=$pkg"
  echo "version=$ver"
  echo "release=$release"
  echo "arch=$arch"
  echo "deb-bytes=$size"
  echo "download-seconds=$((t1 - t0))"
} > "$cache/version"
verify || die "unpacked $cache/vmlinuz is not a valid $arch kernel image"
touch "$stamp"
rm -rf "$cache/apt"          # the .deb, the lists and the extraction directory
echo "$cache/vmlinuz"
