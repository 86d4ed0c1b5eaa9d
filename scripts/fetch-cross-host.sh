#!/usr/bin/env bash
# Fetches what building and trying a release archive for another host arch needs on this machine,
# with private apt directories (changes nothing on the system). Only arm64 from an x86-64 machine:
#   jmods/        Debian unstable's OpenJDK 25 jmods for arm64 (openjdk-25-jdk-headless:arm64):
#                 jlink makes the archive's runtime from them (jlink --module-path jmods)
#   sysroot/      Debian unstable's arm64 libc6, libstdc++6, libgcc-s1 and zlib1g, what that runtime
#                 and the native engines load: the root qemu-aarch64 -L is given to run them here
#   qemu-aarch64  QEMU's user-mode emulator (qemu-user-static of the machine's suite, a static binary)
# Idempotent: a verified cache is reused. Prints the directory.
#
#   scripts/fetch-cross-host.sh arm64 [CACHE_DIR]   (default: ${KPEMU_CACHE:-<repo>/.cache}/cross-arm64)
set -euo pipefail
prog=fetch-cross-host
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/guest-images/apt-private.sh"

case "${1:-}" in
  arm64|aarch64) ;;
  -h|--help) sed -n 2,12p "$0"; exit 0 ;;
  *) usage_error "usage: scripts/fetch-cross-host.sh arm64 [CACHE_DIR] (only arm64 release archives are cross-built)" ;;
esac
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "cross-building for arm64 is done from an amd64 machine"
cache=${2:-${KPEMU_CACHE:-$here/.cache}/cross-arm64}
stamp="$cache/.verified"

verify() {
  [ -f "$cache/jmods/java.base.jmod" ] && [ -x "$cache/qemu-aarch64" ] \
    && [ -e "$cache/sysroot/lib/ld-linux-aarch64.so.1" ] && [ -f "$cache/sysroot/usr/lib/aarch64-linux-gnu/libstdc++.so.6" ]
}
if [ -f "$stamp" ] && verify; then echo "$cache"; exit 0; fi
mkdir -p "$cache"

# The arm64 JDK and the libraries it loads: Debian unstable (OpenJDK 25 is packaged there).
apt_setup "$cache/apt-arm64" arm64 sid
apt_update
jdk=$(apt_download openjdk-25-jdk-headless)
rm -rf "$cache/jmods" "$cache/jdk.tmp"; mkdir -p "$cache/jdk.tmp"
dpkg-deb --fsys-tarfile "$jdk" | tar -x -C "$cache/jdk.tmp" --wildcards './usr/lib/jvm/java-25-openjdk-arm64/jmods/*' \
  || die "openjdk-25-jdk-headless:arm64 has no jmods (jlink needs them to make an arm64 runtime)"
mv "$cache/jdk.tmp/usr/lib/jvm/java-25-openjdk-arm64/jmods" "$cache/jmods"
dpkg-deb -f "$jdk" Version >"$cache/jmods/VERSION"
rm -rf "$cache/jdk.tmp" "$jdk"
rm -rf "$cache/sysroot"; mkdir -p "$cache/sysroot"
for p in libc6 libstdc++6 libgcc-s1 zlib1g; do
  d=$(apt_download "$p"); dpkg-deb -x "$d" "$cache/sysroot"; rm -f "$d"
done
# merged /usr: the programs' interpreter is /lib/ld-linux-aarch64.so.1 (base-files makes the link)
[ -e "$cache/sysroot/lib" ] || ln -s usr/lib "$cache/sysroot/lib"
rm -rf "$cache/apt-arm64"

# QEMU's user-mode emulator for this machine (amd64), of the machine's own suite.
apt_setup "$cache/apt-amd64" amd64
apt_update
d=$(apt_download qemu-user-static)
rm -rf "$cache/qemu.tmp"; mkdir -p "$cache/qemu.tmp"; dpkg-deb -x "$d" "$cache/qemu.tmp"
cp -f "$cache/qemu.tmp/usr/bin/qemu-aarch64-static" "$cache/qemu-aarch64.tmp" && mv -f "$cache/qemu-aarch64.tmp" "$cache/qemu-aarch64"
dpkg-deb -f "$d" Version >"$cache/qemu-aarch64.version"
rm -rf "$cache/qemu.tmp" "$cache/apt-amd64"

verify || die "verification of $cache failed (jmods/java.base.jmod, qemu-aarch64, sysroot's loader and libstdc++)"
touch "$stamp"
echo "$cache"
