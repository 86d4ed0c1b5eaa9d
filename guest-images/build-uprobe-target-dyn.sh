#!/usr/bin/env bash
# guest-images/build-uprobe-target-dyn.sh ARCH OUTDIR: the user program of the uprobe recordings
# (guest-images/programs/uprobe-target.c) built as a dynamically linked program for a guest of ARCH
# (the compiler of guest-images/static-cc.sh, without -static; -O0 as build-uprobe-target.sh), and
# Debian's C library it runs with: the dynamic loader and libc.so.6 of Debian's libc6 for that
# arch (x86_64: the host's own libc6, amd64; arm64: libc6-arm64-cross, the same source built for
# arm64, which the cross compiler links against). Rebuilds only when the source is newer.
# Prints one line per file the guest needs, HOST_PATH:GUEST_PATH (kpemu's --add form): the
# program (/uprobe-target-dyn), the loader at the program's PT_INTERP path, libc.so.6 in the
# loader's multiarch directory. Exit 1 with one line on stderr when it cannot be built.
set -euo pipefail
prog=build-uprobe-target-dyn.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: $prog x86_64|arm64 OUTDIR" >&2; exit 2; }
arch=$1; dir=$2; src="$here/programs/uprobe-target.c"
cc=$("$here/static-cc.sh" "$arch") || exit 1
case "$arch" in
  x86_64|amd64) libdir=/lib/x86_64-linux-gnu; guestlib=/lib/x86_64-linux-gnu ;;
  arm64|aarch64) libdir=/usr/aarch64-linux-gnu/lib; guestlib=/lib/aarch64-linux-gnu ;;
esac
out="$dir/uprobe-target-dyn"
if [ ! -f "$out" ] || [ "$src" -nt "$out" ]; then
  mkdir -p "$dir"
  log=$(mktemp)
  "$cc" -O0 -Wall -Werror -o "$out.tmp" "$src" >"$log" 2>&1 || { echo "$prog: $cc failed on $src: $(head -n 3 "$log")" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
  mv "$out.tmp" "$out"
fi
interp=$(readelf -l "$out" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
[ -n "$interp" ] || { echo "$prog: $out has no program interpreter" >&2; exit 1; }
ld="$libdir/$(basename "$interp")"
libc="$libdir/libc.so.6"
[ -f "$ld" ] && [ -f "$libc" ] || { echo "$prog: no $ld or $libc (Debian's libc6 for $arch)" >&2; exit 1; }
echo "$out:/uprobe-target-dyn"
echo "$(readlink -f "$ld"):$interp"
echo "$(readlink -f "$libc"):$guestlib/libc.so.6"
