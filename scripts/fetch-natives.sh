#!/usr/bin/env bash
# Fetches the native engines kpemu needs (Unicorn 2.1.4 or a newer 2.1.x from Debian unstable,
# Capstone 5 from Debian 13)
# into a project-local cache with private apt directories. Changes nothing on the system.
# Idempotent: a verified cache is reused. Prints the library directory on success.
#
#   scripts/fetch-natives.sh [CACHE_DIR]      (default: <repo>/.cache/natives)
#
# KPEMU_NATIVES_ARCH=arm64 (or x86_64) fetches another host arch's engines, for a release archive of
# that arch (./kpemu dist --host-arch arm64): Debian's packages of that arch, kpemu's C hooks built
# by the cross compiler guest-images/static-cc.sh provides. Give it its own CACHE_DIR.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-${KPEMU_CACHE:-$here/.cache}/natives}
libdir="$cache/lib"
stamp="$cache/.verified"

die() { echo "fetch-natives: $*" >&2; exit 1; }

clock_src=("$here"/emulator/src/main/c/*.c)

# the host arch the engines are for: this machine's, unless KPEMU_NATIVES_ARCH names another
native_debarch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
case "${KPEMU_NATIVES_ARCH:-}" in
  "") debarch=$native_debarch ;;
  x86_64|amd64) debarch=amd64 ;;
  arm64|aarch64) debarch=arm64 ;;
  *) echo "fetch-natives: unknown KPEMU_NATIVES_ARCH '${KPEMU_NATIVES_ARCH}' (x86_64 or arm64)" >&2; exit 2 ;;
esac

# kpemu's own C hooks (the instruction clock, x86 syscall), one library built against the fetched
# Unicorn headers.
build_clock() {
  local cc=gcc
  if [ "$debarch" != "$native_debarch" ]; then   # another arch's library: Debian's cross compiler
    cc=$("$here/guest-images/static-cc.sh" "$debarch") || die "no C compiler for $debarch (guest-images/static-cc.sh $debarch)"
  fi
  command -v "$cc" >/dev/null || die "$cc is needed to build kpemu's instruction clock (emulator/src/main/c); install Debian's 'gcc' package"
  "$cc" -O2 -Wall -shared -fPIC -I "$cache/include" -o "$libdir/libkpemu_clock.so.tmp" "${clock_src[@]}" \
      -L "$libdir" -l:libunicorn.so.2 -Wl,-rpath,'$ORIGIN' || die "compiling ${clock_src[*]} failed"
  mv -f "$libdir/libkpemu_clock.so.tmp" "$libdir/libkpemu_clock.so"
}

clock_current() {
  local src
  [ -f "$libdir/libkpemu_clock.so" ] || return 1
  for src in "${clock_src[@]}" "$here"/emulator/src/main/c/*.h; do [ ! "$src" -nt "$libdir/libkpemu_clock.so" ] || return 1; done
}

# Unicorn 2.1.4 is the first Debian-packaged release that hooks RDTSC/RDTSCP (the guest TSC on
# the virtual clock) and checks every store to a page with translated code (docs/x86-boot-notes.md).
unicorn_ok() { # $1: a Debian version string
  case "$1" in 2.1.[4-9]*|2.1.[1-9][0-9]*) return 0 ;; *) return 1 ;; esac
}

verify() {
  [ -f "$libdir/libunicorn.so.2" ] && [ -f "$libdir/libcapstone.so" ] && [ -f "$libdir/libkpemu_clock.so" ] || return 1
  # A cache fetched for an older kpemu (Unicorn 2.1.1) is fetched again.
  [ -f "$cache/versions" ] && unicorn_ok "$(sed -n 's/^unicorn=//p' "$cache/versions")" || return 1
  # Unicorn must be 2.1.x: older 2.0.x ignores guest page tables.
  grep -c uc_ctl "$libdir/libunicorn.so.2" >/dev/null || return 1
  grep -c cs_disasm "$libdir/libcapstone.so" >/dev/null || return 1
  return 0
}

# The manifest kpemu-base's jar carries with the libraries (docs/reference.md, "Installed kpemu"): each library's
# SHA-256 (checked when a program without a checkout unpacks them into the user's cache) and the
# Debian versions they came from (kpemu --version).
write_manifest() {
  (cd "$libdir" && sha256sum libunicorn.so.2 libcapstone.so libkpemu_clock.so >SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS)
  cp -f "$cache/versions" "$libdir/versions"
}
manifest_current() {
  local f
  [ -f "$libdir/SHA256SUMS" ] && [ -f "$libdir/versions" ] || return 1
  for f in libunicorn.so.2 libcapstone.so libkpemu_clock.so; do [ ! "$libdir/$f" -nt "$libdir/SHA256SUMS" ] || return 1; done
}

if [ -f "$stamp" ] && [ -d "$cache/include/unicorn" ] && [ -f "$libdir/libunicorn.so.2" ]; then
  clock_current || build_clock
  if verify; then manifest_current || write_manifest; echo "$libdir"; exit 0; fi
fi

command -v apt-get >/dev/null || die "apt-get is not available; kpemu needs Debian's apt to fetch Unicorn and Capstone"
command -v dpkg-deb >/dev/null || die "dpkg-deb is not available"

# The mirror comes from the machine's own apt sources (deb822 or one-line format).
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  m=$(awk '/^URIs:/ {for (i=2;i<=NF;i++) print $i}' "$f" | grep -v -- '-security' | grep '/debian/\?$' | head -n1 || true)
  [ -n "$m" ] && { mirror=$m; break; }
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list | grep -v -- '-security' | head -n1 || true)
fi
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources"
mirror=${mirror%/}

work="$cache/apt"
# $debarch (above): the host's own architecture, where the engines run in this process (amd64,
# arm64), or the one KPEMU_NATIVES_ARCH names
rm -rf "$work"; mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/etc/sources.list.d" "$work/etc/preferences.d" "$work/debs"
# Unicorn 2.1.4 lives in Debian unstable (it needs only libc6 >= 2.34, so it loads on Debian 12);
# Capstone 5 comes from Debian 13 (trixie): kpemu's binding is written against Capstone 5's API.
printf 'deb [trusted=yes] %s trixie main\ndeb [trusted=yes] %s sid main\n' "$mirror" "$mirror" > "$work/etc/sources.list"
aptopts=(-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
         -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/sources.list.d"
         -o Dir::Etc::Preferences="$work/etc/preferences" -o Dir::Etc::PreferencesParts="$work/etc/preferences.d"
         -o Dir::State::status=/dev/null -o Debug::NoLocking=1
         -o APT::Architecture="$debarch" -o APT::Architectures="$debarch"
         -o Acquire::Retries=2 -o Acquire::http::Timeout=60)
apt-get "${aptopts[@]}" update >"$work/update.log" 2>&1 || die "apt-get update against the machine's Debian mirror failed (network or apt unavailable); see $work/update.log"
capstone_pkg=libcapstone5
(cd "$work/debs" && apt-get "${aptopts[@]}" download libunicorn2t64/sid libunicorn-dev/sid "$capstone_pkg/trixie" >"$work/download.log" 2>&1) \
  || die "apt-get download of libunicorn2t64, libunicorn-dev (unstable) and $capstone_pkg (trixie) failed; see $work/download.log"
ver=$(dpkg-deb -f "$work"/debs/libunicorn2t64_*.deb Version)
unicorn_ok "$ver" || die "Debian unstable offers libunicorn2t64 $ver; kpemu needs 2.1.4 or a newer 2.1.x"
rm -rf "$cache/root"; mkdir -p "$cache/root" "$libdir"
for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$cache/root"; done
uso=$(find "$cache/root" -name 'libunicorn.so.2*' -type f | head -n1)
cso=$(find "$cache/root" -name 'libcapstone.so.*' -type f | head -n1)
[ -n "$uso" ] && [ -n "$cso" ] || die "unpacked packages lack libunicorn.so.2 or libcapstone.so"
cp -f "$uso" "$libdir/libunicorn.so.2"
cp -f "$cso" "$libdir/libcapstone.so"
rm -rf "$cache/include"; cp -r "$cache/root/usr/include" "$cache/include"
build_clock
echo "unicorn=$ver" > "$cache/versions"
echo "capstone=$(dpkg-deb -f "$work"/debs/${capstone_pkg}_*.deb Version) ($capstone_pkg)" >> "$cache/versions"
verify || die "verification of the unpacked libraries failed"
write_manifest
touch "$stamp"
rm -rf "$work/lists" "$work/cache"
echo "$libdir"
