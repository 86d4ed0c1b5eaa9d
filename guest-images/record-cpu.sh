#!/usr/bin/env bash
# Records the CPU as Linux sees it on the reference machine (issue 32: kpemu's guest-visible CPU
# against QEMU's): the same kernel and kpemu's initramfs builder with reference/cpu.init as /init,
# booted under QEMU TCG (-M pc's default qemu64 on x86-64; virt with cortex-a57 on arm64, as every
# reference boot). Keeps the lines between the init's markers: the first CPU's /proc/cpuinfo
# (bogomips and MHz dropped: the host's speed), the vulnerabilities files, the boot log's CPU and
# mitigation lines.
#
#   guest-images/record-cpu.sh [--kernel debian[:SUITE]] ARCH
#     writes guest-images/reference/ARCH/SERIES/cpu.view
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-cpu
. "$here/qemu-reference.sh"
reference_args "record-cpu.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
series=$(kernel_series)
dir="$here/reference/$arch/$series"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kpemu_cli initramfs --arch "$arch" --kernel "$kernel" --init "$here/reference/cpu.init" -o "$work/cpu.cpio" >/dev/null
qemu_boot "$work/cpu.cpio" "nokaslr panic=-1" "$work/linux.log" KPEMU-INIT-DONE
grep -aq KPEMU-CPU-END "$work/linux.log" || { tail -n 30 "$work/linux.log" >&2; die "the guest did not print its CPU"; }
{
  kernel_header
  echo "# guest-images/record-cpu.sh: the guest's view of its CPU under QEMU (reference/cpu.init)"
  tr -d '\r' < "$work/linux.log" | sed -n '/^KPEMU-CPU-BEGIN/,/^KPEMU-CPU-END/p' | grep -v '^KPEMU-CPU-' \
    | grep -vE '^cpuinfo (bogomips|BogoMIPS|cpu MHz)[[:space:]]*:'
} > "$dir/cpu.view"
echo "recorded the CPU view of $arch to $dir/cpu.view" >&2
