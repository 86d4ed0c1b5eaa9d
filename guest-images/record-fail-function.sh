#!/usr/bin/env bash
# Records Linux's OWN fail_function (CONFIG_FAIL_FUNCTION, debugfs fail_function/) under QEMU, the
# reference for kpemu's `boot --fail`: for each case of guest-images/reference/fail-function/cases
# one boot of the kernel (one that has fail_function: guest-images/build-kernel.sh builds it) with
# kpemu's busybox initramfs and an /init that, when the kernel command line says kpemu_fail=linux,
# sets up the injection as Documentation/fault-injection/fault-injection.rst does:
#     echo FUNCTION > /sys/kernel/debug/fail_function/inject
#     printf %#x RETVAL > /sys/kernel/debug/fail_function/FUNCTION/retval
#     echo Y > .../task-filter; echo 100 > .../probability; echo 1 > .../interval
#     echo 1 > .../times; echo 0 > .../space; echo 1 > .../verbose
# then clears the kernel's messages (dmesg -c), runs the command in a child shell that first sets
# its own /proc/self/make-it-fail to 1 (the task filter's mark, inherited by nothing else) and
# exec's it, and prints between markers its exit status, its output (stdout and stderr) and the
# kernel messages it caused (dmesg, timestamps cut):
#     KPEMU-FAIL-CASE NAME FUNCTION RETVAL / KPEMU-FAIL-STATUS N /
#     KPEMU-FAIL-OUTPUT-BEGIN ... KPEMU-FAIL-OUTPUT-END / KPEMU-FAIL-KMSG-BEGIN ... KPEMU-FAIL-KMSG-END
# Without kpemu_fail=linux the same init injects nothing itself: kpemu boots it with --fail
# (SourceKernelFailFunctionTest).
#
#   guest-images/record-fail-function.sh --kernel FILE [--out-dir DIR] [--initramfs-dir DIR] ARCH [CASE...]
#     --kernel         the kernel file QEMU boots (x86_64: bzImage; arm64: Image)
#     --out-dir        where CASE.txt goes (default guest-images/reference/fail-function/ARCH/SERIES)
#     --initramfs-dir  also keep each case's initramfs there as CASE.cpio (what kpemu boots)
#     CASE             cases by name (default: all)
#   exit: 0 recorded, 1 error, 2 usage
set -euo pipefail
{ # read whole before it runs (an edit of this file must not change a running one)
prog=record-fail-function
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/qemu-reference.sh"

usage="usage: record-fail-function.sh --kernel FILE [--out-dir DIR] [--initramfs-dir DIR] x86_64|arm64 [CASE...]"
kernel=""; out_dir=""; keep_dir=""; arch=""; cases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) [ $# -ge 2 ] || { echo "$prog: $usage" >&2; exit 2; }; kernel=$2; shift ;;
    --out-dir) [ $# -ge 2 ] || { echo "$prog: $usage" >&2; exit 2; }; out_dir=$2; shift ;;
    --initramfs-dir) [ $# -ge 2 ] || { echo "$prog: $usage" >&2; exit 2; }; keep_dir=$2; shift ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "$prog: unknown option '$1'; $usage" >&2; exit 2 ;;
    *) if [ -z "$arch" ]; then arch=$1; else cases+=("$1"); fi ;;
  esac
  shift
done
case "$arch" in
  x86_64) sys=__x64_sys_ ;;
  arm64) sys=__arm64_sys_ ;;
  *) echo "$prog: $usage" >&2; exit 2 ;;
esac
[ -n "$kernel" ] && [ -f "$kernel" ] || { echo "$prog: --kernel needs a kernel file; $usage" >&2; exit 2; }
kernel_file=$(readlink -f "$kernel")
need_qemu "$arch"
release=$(file_release "$kernel_file")
series=$(echo "$release" | grep -oE '^[0-9]+\.[0-9]+')
out_dir=${out_dir:-$here/reference/fail-function/$arch/$series}
table="$here/reference/fail-function/cases"
mkdir -p "$out_dir"
[ -z "$keep_dir" ] || mkdir -p "$keep_dir"

work=$(mktemp -d)
trap '[ -n "${KPEMU_KEEP_WORK:-}" ] || rm -rf "$work"' EXIT

# case_init NAME FUNCTION RETVAL COMMAND: the /init of one case
case_init() {
  local name=$1 func=$2 retval=$3 command=$4
  cat <<EOF
#!/bin/sh
# kpemu fail_function case $name: $func returns $retval for: $command
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /tmp /mnt
mount -t ramfs ramfs /mnt
echo hello from fail_function > /tmp/fail-function.txt
echo "KPEMU-FAIL-CASE $name $func $retval"
if grep -qw kpemu_fail=linux /proc/cmdline; then
  d=/sys/kernel/debug/fail_function
  echo $func > \$d/inject || echo "KPEMU-FAIL-SETUP inject failed"
  printf %#x $retval > \$d/$func/retval || echo "KPEMU-FAIL-SETUP retval failed"
  echo Y > \$d/task-filter
  echo 100 > \$d/probability
  echo 1 > \$d/interval
  echo 1 > \$d/times
  echo 0 > \$d/space
  echo 1 > \$d/verbose
fi
dmesg -c > /dev/null
sh -c 'echo 1 > /proc/self/make-it-fail; exec $command' > /tmp/fail-output 2>&1
echo "KPEMU-FAIL-STATUS \$?"
echo KPEMU-FAIL-OUTPUT-BEGIN
cat /tmp/fail-output
echo KPEMU-FAIL-OUTPUT-END
echo KPEMU-FAIL-KMSG-BEGIN
dmesg | sed 's/^\[ *[0-9]*\.[0-9]*\] //'
echo KPEMU-FAIL-KMSG-END
poweroff -f
EOF
}

n=0
while read -r name func retval command <&3; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ ${#cases[@]} -gt 0 ] && [[ " ${cases[*]} " != *" $name "* ]]; then continue; fi
  func=${func/#SYS_/$sys}
  case_init "$name" "$func" "$retval" "$command" > "$work/init"
  kpemu_cli initramfs --arch "$arch" --init "$work/init" -o "$work/$name.cpio" >/dev/null </dev/null
  [ -z "$keep_dir" ] || cp "$work/$name.cpio" "$keep_dir/$name.cpio"
  append="nokaslr panic=-1 quiet kpemu_fail=linux"
  qemu_boot "$work/$name.cpio" "$append" "$work/console" KPEMU-FAIL-KMSG-END </dev/null
  grep -aq KPEMU-FAIL-KMSG-END "$work/console" || { tail -n 30 "$work/console" >&2; die "case $name: the boot did not finish the case"; }
  qemu_command "$work/$name.cpio" "$append"
  {
    echo "# Linux's own fail_function, recorded by guest-images/record-fail-function.sh under QEMU."
    echo "# kernel: $release (sha256 $(sha256sum < "$kernel_file" | cut -d' ' -f1))"
    echo "# qemu: $("$qemu" --version | head -n1)"
    echo "# case: $name: $func returns $retval (times=1, probability=100, interval=1, space=0, verbose=1,"
    echo "#   task-filter=Y with the command's /proc/self/make-it-fail=1) for: $command"
    echo "# boot: ${cmd[*]/#$kernel_file/KERNEL}" | sed "s#$work/$name.cpio#INITRAMFS#"
    echo "# init:"
    sed 's/^/#   /' "$work/init"
    tr -d '\r' < "$work/console" | sed -e 's/.*\(KPEMU-FAIL-CASE \)/\1/' | sed -n '/^KPEMU-FAIL-CASE /,/^KPEMU-FAIL-KMSG-END$/p'
  } > "$out_dir/$name.txt"
  if grep -q '^KPEMU-FAIL-SETUP' "$out_dir/$name.txt"; then die "case $name: Linux refused the injection; see $out_dir/$name.txt"; fi
  echo "$prog: $arch $name: $(grep '^KPEMU-FAIL-STATUS' "$out_dir/$name.txt") -> $out_dir/$name.txt" >&2
  n=$((n + 1))
done 3< "$table"
[ "$n" -gt 0 ] || die "no case named ${cases[*]} in $table"
exit 0
}
