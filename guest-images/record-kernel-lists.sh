#!/usr/bin/env bash
# Records lists Linux itself keeps about its text, as the reference for what kpemu reads from the
# kernel file before boot: the kprobe blacklist (debugfs kprobes/blacklist: every range kprobes
# refuses, NOKPROBE_SYMBOL functions and blacklisted sections) and the functions ftrace can trace
# after boot (tracefs available_filter_functions: trace_kprobe refuses the others as "notrace").
# Boots the kernel kpemu boots under QEMU TCG with kpemu's busybox initramfs.
#
#   guest-images/record-kernel-lists.sh [--kernel debian[:SUITE]] ARCH
#     writes guest-images/reference/ARCH/SERIES/kprobe_blacklist             (header + "0xSTART-0xEND\tSYMBOL" lines)
#            guest-images/reference/ARCH/SERIES/available_filter_functions.digest
#                   (header, line count and sha256 of the sorted unique names; the full list is
#                    kept in <cache>/reference/ARCH/SERIES/available_filter_functions for comparisons by hand)
# Needs qemu-system-x86 / qemu-system-arm (installed with apt-get when missing and run as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-kernel-lists
. "$here/qemu-reference.sh"

reference_args "record-kernel-lists.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-kernel-lists.sh [--kernel debian[:SUITE]] x86_64|arm64"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/init" <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
echo KPEMU-LISTS-BEGIN
busybox sed 's/^/KPEMU-BL /' /sys/kernel/debug/kprobes/blacklist
busybox sed 's/^/KPEMU-FF /' /sys/kernel/tracing/available_filter_functions
echo KPEMU-LISTS-END
poweroff -f
INIT
initramfs=$("$root/kpemu" initramfs --arch "$arch" --init "$work/init" -o "$work/initramfs.cpio")
log="$work/console.log"
qemu_boot "$initramfs" "nokaslr panic=-1 loglevel=1" "$log" KPEMU-LISTS-END
grep -q 'KPEMU-LISTS-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-LISTS-END"; }

series=$(kernel_series)
out="$here/reference/$arch/$series"
mkdir -p "$out" "${KPEMU_CACHE:-$root/.cache}/reference/$arch/$series"
full="${KPEMU_CACHE:-$root/.cache}/reference/$arch/$series/available_filter_functions"
tr -d '\r' < "$log" | sed -n 's/^KPEMU-FF //p' > "$full"
{
  echo "# Linux's own debugfs kprobes/blacklist, recorded by guest-images/record-kernel-lists.sh."
  kernel_header
  tr -d '\r' < "$log" | sed -n 's/^KPEMU-BL //p'
} > "$out/kprobe_blacklist"
{
  echo "# Linux's own tracefs available_filter_functions (functions ftrace can trace after boot),"
  echo "# recorded by guest-images/record-kernel-lists.sh: its line count, and the sha256 of its"
  echo "# sorted unique names (sort -u, C locale), one per line with a trailing newline."
  kernel_header
  echo "lines=$(wc -l < "$full")"
  echo "unique-names-sha256=$(LC_ALL=C sort -u "$full" | sha256sum | cut -d' ' -f1)"
} > "$out/available_filter_functions.digest"
echo "recorded $(grep -vc '^#' "$out/kprobe_blacklist") blacklist ranges and $(wc -l < "$full") traceable functions for $arch"
