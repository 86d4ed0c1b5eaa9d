#!/usr/bin/env bash
# guest-images/build-guest-bench.sh ARCH OUTPUT: builds the guest micro-benchmarks of
# `kpemu bench guest` (guest-images/guest-bench/kbench.c) as one static program for a guest of
# ARCH, with the compiler guest-images/static-cc.sh names. Rebuilds only when the source is newer
# than OUTPUT. Exit 0 with OUTPUT on stdout; 1 with one line on stderr when it cannot be built.
set -euo pipefail
prog=build-guest-bench.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: $prog x86_64|arm64 OUTPUT" >&2; exit 2; }
arch=$1; out=$2; src="$here/guest-bench/kbench.c"
cc=$("$here/static-cc.sh" "$arch") || exit 1
if [ ! -f "$out" ] || [ "$src" -nt "$out" ]; then
  mkdir -p "$(dirname "$out")"
  log=$(mktemp)
  "$cc" -static -O2 -Wall -Werror -o "$out.tmp" "$src" >"$log" 2>&1 || { echo "$prog: $cc failed on $src: $(head -n 3 "$log")" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
  mv "$out.tmp" "$out"
fi
echo "$out"
