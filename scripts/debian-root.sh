#!/usr/bin/env bash
# Builds a clean Debian root (debootstrap --variant=minbase: dpkg, apt, bash, coreutils; no JDK,
# Maven or gcc) for testing kpemu's Debian package as a new user would install it. debootstrap
# itself is fetched with the project's private apt directories (guest-images/apt-private.sh) and
# run from where it was unpacked; nothing is installed on the host. Needs root. Idempotent: a
# finished root is reused. Prints the root's path.
#
#   scripts/debian-root.sh [SUITE] [DIR]     (default: bookworm, <cache>/debian-root/SUITE)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=debian-root
. "$here/guest-images/apt-private.sh"
suite=${1:-bookworm}
cache=${KPEMU_CACHE:-$here/.cache}
dir=${2:-$cache/debian-root/$suite}
[ "$(id -u)" = 0 ] || die "debootstrap needs root"
if [ -f "$dir/.kpemu-root-complete" ]; then echo "$dir"; exit 0; fi

tools="$cache/debootstrap"
if [ ! -x "$tools/usr/sbin/debootstrap" ]; then
  apt_setup "$cache/debootstrap-apt" "$(dpkg --print-architecture)" "$(host_suite)"
  apt_update
  deb=$(apt_download debootstrap)
  rm -rf "$tools"; mkdir -p "$tools"
  dpkg-deb -x "$deb" "$tools"
  rm -rf "$cache/debootstrap-apt"
fi
mirror=$(_find_mirror '/debian/?$')
[ -n "$mirror" ] || die "no Debian mirror in the machine's apt sources"
rm -rf "$dir"; mkdir -p "$dir"
echo "$prog: debootstrap --variant=minbase $suite into $dir from $mirror" >&2
DEBOOTSTRAP_DIR="$tools/usr/share/debootstrap" "$tools/usr/sbin/debootstrap" --variant=minbase --no-check-gpg \
    "$suite" "$dir" "$mirror" >"$dir.log" 2>&1 || die "debootstrap failed; see $dir.log"
# the root's apt uses the same mirror (and its security suite) as the machine
secmirror=$(_find_mirror '/debian-security/?$'); [ -n "$secmirror" ] || secmirror=$(echo "$mirror" | sed -E 's#/debian$#/debian-security#')
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' "$mirror" "$suite" "$mirror" "$suite" "$secmirror" "$suite" >"$dir/etc/apt/sources.list"
touch "$dir/.kpemu-root-complete"
echo "$dir"
