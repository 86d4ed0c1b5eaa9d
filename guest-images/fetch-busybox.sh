#!/usr/bin/env bash
# Fetches Debian's busybox-static for one guest architecture into the project cache with
# private apt directories (nothing on the system changes) and keeps only the static binary.
# Idempotent: a verified cache is reused unless --refresh is given. Prints the binary's path.
#
#   guest-images/fetch-busybox.sh [--refresh] x86_64|arm64
#   cache: ${KPEMU_CACHE:-<repo>/.cache}/guest/<arch>/{busybox,busybox.version}
set -euo pipefail
prog=fetch-busybox
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"

parse_arch_args 2,8 "$@"
debarch=$(debarch_of "$arch")
case "$debarch" in amd64) arch=x86_64; machine=3e ;; arm64) arch=arm64; machine=b7 ;; esac
cache=${KPEMU_CACHE:-$root/.cache}/guest/$arch
stamp="$cache/.busybox-verified"

# A static ELF64 little-endian executable for the right machine, with no program interpreter.
verify() {
  local f=$cache/busybox
  [ -s "$f" ] && [ -s "$cache/busybox.version" ] || return 1
  [ "$(od -An -tx1 -N6 "$f" | tr -d ' \n')" = "7f454c460201" ] || return 1
  [ "$(od -An -tx1 -j18 -N1 "$f" | tr -d ' ')" = "$machine" ] || return 1
  # no PT_INTERP (3) among the program headers
  local phoff phnum i
  phoff=$(od -An -tu8 -j32 -N8 "$f" | tr -d ' '); phnum=$(od -An -tu2 -j56 -N2 "$f" | tr -d ' ')
  for ((i = 0; i < phnum; i++)); do
    [ "$(od -An -tu4 -j$((phoff + i * 56)) -N4 "$f" | tr -d ' ')" != 3 ] || return 1
  done
}

if [ $refresh = 0 ] && [ -f "$stamp" ] && verify; then echo "$cache/busybox"; exit 0; fi

mkdir -p "$cache"
apt_setup "$cache/apt-busybox" "$debarch"
apt_update
t0=$(date +%s)
deb=$(apt_download busybox-static)
t1=$(date +%s)
ver=$(dpkg-deb -f "$deb" Version)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$debarch" ] || die "$deb is not an $debarch package"
ex="$apt_work/extract"; rm -rf "$ex"; mkdir -p "$ex"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$ex" ./bin/busybox 2>"$apt_work/tar.log" \
  || die "$deb holds no /bin/busybox; see $apt_work/tar.log"
rm -f "$stamp"
mv -f "$ex/bin/busybox" "$cache/busybox"
chmod 0755 "$cache/busybox"
{
  echo "package=busybox-static"
  echo "version=$ver"
  echo "arch=$arch"
  echo "deb-bytes=$(stat -c %s "$deb")"
  echo "download-seconds=$((t1 - t0))"
} > "$cache/busybox.version"
verify || die "unpacked $cache/busybox is not a static $arch ELF executable"
touch "$stamp"
rm -rf "$apt_work"
echo "$cache/busybox"
