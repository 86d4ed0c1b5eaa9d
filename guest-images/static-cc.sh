#!/usr/bin/env bash
# guest-images/static-cc.sh ARCH: prints the C compiler that builds static programs for a guest
# of ARCH (x86_64: gcc; arm64: Debian's aarch64-linux-gnu-gcc), installing it with apt-get when
# missing (as guest-images/build-kernel.sh installs its tools; as root). Used by the tests that
# run a program of their own in the guest (kpemu boot --add PROG -- PROG).
# Exit 0 with the compiler's name on stdout; 1 with one line on stderr when it cannot be had.
set -euo pipefail
prog=static-cc.sh
die() { echo "$prog: $*" >&2; exit 1; }
case "${1:-}" in
  x86_64|amd64) cc=gcc; pkg=gcc; libc=/usr/lib/x86_64-linux-gnu/libc.a; libcpkg=libc6-dev ;;
  arm64|aarch64) cc=aarch64-linux-gnu-gcc; pkg=gcc-aarch64-linux-gnu; libc=/usr/aarch64-linux-gnu/lib/libc.a; libcpkg=libc6-dev-arm64-cross ;;
  *) echo "usage: $prog x86_64|arm64" >&2; exit 2 ;;
esac
missing=()
command -v "$cc" >/dev/null || missing+=("$pkg")
[ -f "$libc" ] || missing+=("$libcpkg")
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "${missing[*]} missing; install with apt-get as root"
  command -v apt-get >/dev/null || die "${missing[*]} missing and apt-get is not available"
  log=$(mktemp)
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 \
    || die "apt-get install ${missing[*]} failed; see $log"
  rm -f "$log"
fi
echo "$cc"
