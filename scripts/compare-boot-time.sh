#!/usr/bin/env bash
# Boot time of kpemu against QEMU TCG (the reference machine) on the same kernel file and the same
# initramfs, whole process from start to the guest's power-off, runs alternating, medians and ratio:
# wall time, CPU time (user + system, all threads) and peak memory (maximum resident set).
#
#   scripts/compare-boot-time.sh [--kernel debian[:SUITE]] [--runs N] [--snapshot] x86_64|arm64
#
# --snapshot adds a kpemu probe session started from a snapshot (`boot --from-init -e 'p:o
# do_sys_openat2' --snapshot-file F`, the file saved by one boot before the runs), to power-off,
# as a ratio to QEMU's cold boot. kpemu boots the kernel as Debian ships it (x86_64: the bzImage);
# QEMU boots what it can boot fastest from the same package (x86_64: the decompressed vmlinux
# through the PVH entry; arm64: the Image). Needs qemu-system-x86 / qemu-system-arm and GNU time
# (/usr/bin/time). Wall-clock figures: run on an idle machine; CPU time moves less with load.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kernel=debian; runs=5; arch=""; snapshot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --snapshot) snapshot=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) arch=$1; shift ;;
  esac
done
case "$arch" in
  x86_64) qemu=(qemu-system-x86_64 -M pc) ; console=ttyS0 ;;
  arm64) qemu=(qemu-system-aarch64 -M virt -cpu cortex-a57) ; console=ttyAMA0 ;;
  *) echo "compare-boot-time: usage: compare-boot-time.sh [--kernel debian[:SUITE]] [--runs N] [--snapshot] x86_64|arm64" >&2; exit 2 ;;
esac
command -v "${qemu[0]}" >/dev/null || { echo "compare-boot-time: ${qemu[0]} is missing" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "compare-boot-time: GNU time (/usr/bin/time) is missing" >&2; exit 1; }
img() { "$root/kpemu" images --kernel "$kernel" --arch "$arch" --print "$1"; }
initramfs=$(img initramfs); release=$(img release)
if [ "$arch" = x86_64 ]; then qkernel=$(img vmlinux); else qkernel=$(img kernel); fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
measure() {   # NAME COMMAND...: appends "wall cpu maxrss-KiB" to $tmp/NAME
  local name=$1; shift
  /usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$@" >/dev/null 2>&1 </dev/null || true
  awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$tmp/t" >>"$tmp/$name"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v c="$2" '{print $c}' "$tmp/$1" | median; }

probe=(-e 'p:o do_sys_openat2')
if [ -n "$snapshot" ]; then
  snap="$tmp/session.snapshot"
  "$root/kpemu" boot --arch "$arch" --kernel "$kernel" --console /dev/null --from-init "${probe[@]}" --snapshot-file "$snap" >/dev/null 2>&1
fi
for i in $(seq "$runs"); do
  measure kpemu "$root/kpemu" boot --arch "$arch" --kernel "$kernel" --console /dev/null
  measure qemu timeout 300 "${qemu[@]}" -m 256 -nographic -no-reboot -kernel "$qkernel" -initrd "$initramfs" \
      -append "console=$console nokaslr panic=-1"
  [ -z "$snapshot" ] || measure session "$root/kpemu" boot --arch "$arch" --kernel "$kernel" --console /dev/null --from-init "${probe[@]}" --snapshot-file "$snap"
done
report() {   # LABEL NAME
  printf '%s %s: %-28s wall %.2f s (%.2f), CPU %.2f s (%.2f), peak memory %d MiB (%.2f)\n' "$arch" "$release" "$1" \
    "$(col "$2" 1)" "$(echo "$(col "$2" 1) / $(col qemu 1)" | bc -l)" \
    "$(col "$2" 2)" "$(echo "$(col "$2" 2) / $(col qemu 2)" | bc -l)" \
    "$(( $(col "$2" 3) / 1024 ))" "$(echo "$(col "$2" 3) / $(col qemu 3)" | bc -l)"
}
echo "median of $runs, whole process to power-off, (ratio to QEMU's cold boot):"
report "QEMU TCG cold boot" qemu
report "kpemu cold boot" kpemu
[ -z "$snapshot" ] || report "kpemu session from snapshot" session
