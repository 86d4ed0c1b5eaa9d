#!/usr/bin/env bash
# guest-images/build-uprobe-target.sh ARCH OUTPUT: builds the user program of the uprobe
# recordings and tests (guest-images/programs/uprobe-target.c) as a static program for a guest of
# ARCH, with the compiler guest-images/static-cc.sh names (-O0: every function keeps its frame and
# is entered by a call; not stripped: its .symtab gives the probe offsets, see uprobe_target_offsets
# in uprobe-target-offsets.sh). Rebuilds only when the source is newer than OUTPUT.
# Exit 0 with OUTPUT on stdout; 1 with one line on stderr when it cannot be built.
set -euo pipefail
prog=build-uprobe-target.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: $prog x86_64|arm64 OUTPUT" >&2; exit 2; }
arch=$1; out=$2; src="$here/programs/uprobe-target.c"
cc=$("$here/static-cc.sh" "$arch") || exit 1
if [ ! -f "$out" ] || [ "$src" -nt "$out" ]; then
  mkdir -p "$(dirname "$out")"
  log=$(mktemp)
  "$cc" -static -O0 -Wall -Werror -o "$out.tmp" "$src" >"$log" 2>&1 || { echo "$prog: $cc failed on $src: $(head -n 3 "$log")" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
  mv "$out.tmp" "$out"
fi
echo "$out"
