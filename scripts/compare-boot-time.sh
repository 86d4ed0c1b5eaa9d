#!/usr/bin/env bash
# Boot time of kpemu against QEMU TCG (the reference machine) on the same kernel file and the same
# initramfs, whole process from start to the guest's power-off, runs alternating, medians and ratio.
#
#   scripts/compare-boot-time.sh [--kernel debian[:SUITE]] [--runs N] x86_64|arm64
#
# kpemu boots the kernel as Debian ships it (x86_64: the bzImage); QEMU boots what it can boot
# fastest from the same package (x86_64: the decompressed vmlinux through the PVH entry; arm64: the
# Image). Needs qemu-system-x86 / qemu-system-arm. Wall-clock figures: run on an idle machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kernel=debian; runs=5; arch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) arch=$1; shift ;;
  esac
done
case "$arch" in
  x86_64) qemu=(qemu-system-x86_64 -M pc) ; console=ttyS0 ;;
  arm64) qemu=(qemu-system-aarch64 -M virt -cpu cortex-a57) ; console=ttyAMA0 ;;
  *) echo "compare-boot-time: usage: compare-boot-time.sh [--kernel debian[:SUITE]] [--runs N] x86_64|arm64" >&2; exit 2 ;;
esac
command -v "${qemu[0]}" >/dev/null || { echo "compare-boot-time: ${qemu[0]} is missing" >&2; exit 1; }
img() { "$root/kpemu" images --kernel "$kernel" --arch "$arch" --print "$1"; }
initramfs=$(img initramfs); release=$(img release)
if [ "$arch" = x86_64 ]; then qkernel=$(img vmlinux); else qkernel=$(img kernel); fi

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
kt=(); qt=()
for i in $(seq "$runs"); do
  t0=$(now); "$root/kpemu" boot --arch "$arch" --kernel "$kernel" --console /dev/null >/dev/null 2>&1; t1=$(now)
  kt+=("$(echo "$t1 - $t0" | bc)")
  t0=$(now); timeout 300 "${qemu[@]}" -m 256 -nographic -no-reboot -kernel "$qkernel" -initrd "$initramfs" \
      -append "console=$console nokaslr panic=-1" >/dev/null 2>&1 </dev/null || true; t1=$(now)
  qt+=("$(echo "$t1 - $t0" | bc)")
done
k=$(printf '%s\n' "${kt[@]}" | median); q=$(printf '%s\n' "${qt[@]}" | median)
printf '%s %s: kpemu %.2f s, QEMU %.2f s (median of %d, whole process to power-off), ratio %.2f\n' \
  "$arch" "$release" "$k" "$q" "$runs" "$(echo "$k / $q" | bc -l)"
