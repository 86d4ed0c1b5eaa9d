#!/usr/bin/env bash
# Fetches Debian's lzop (and the liblzo2 it links) into the project cache with private apt
# directories, for the tests that make real lzop payloads. Changes nothing on the system.
#   scripts/fetch-lzop.sh      prints the path of a wrapper that runs lzop from the cache
# The cache is $KPEMU_CACHE (default <repo>/.cache); the result lands in <cache>/tools/lzop.
set -euo pipefail
prog=fetch-lzop
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/guest-images/apt-private.sh"
cache=${KPEMU_CACHE:-$root/.cache}
dest="$cache/tools/lzop"
wrapper="$dest/lzop"
if [ -x "$wrapper" ] && "$wrapper" --version >/dev/null 2>&1; then echo "$wrapper"; exit 0; fi
command -v dpkg >/dev/null || die "dpkg is not available; lzop comes from Debian's archive"
apt_setup "$cache/tools/apt-lzop" "$(dpkg --print-architecture)"
apt_update
rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
for pkg in lzop liblzo2-2; do dpkg-deb -x "$(apt_download "$pkg")" "$dest.tmp/root"; done
lib=$(dirname "$(find "$dest.tmp/root" -name 'liblzo2.so.2*' | head -n1)")
[ -x "$dest.tmp/root/usr/bin/lzop" ] && [ -d "$lib" ] || die "the lzop packages did not contain usr/bin/lzop and liblzo2.so.2"
cat > "$dest.tmp/lzop" <<WRAP
#!/bin/sh
d=\$(dirname "\$0")
LD_LIBRARY_PATH="\$d/root/${lib#"$dest.tmp/root/"}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/root/usr/bin/lzop" "\$@"
WRAP
chmod +x "$dest.tmp/lzop"
rm -rf "$dest"; mv "$dest.tmp" "$dest"
"$wrapper" --version >/dev/null 2>&1 || die "$wrapper does not run"
rm -rf "$cache/tools/apt-lzop"
echo "$wrapper"
