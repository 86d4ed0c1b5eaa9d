#!/usr/bin/env bash
# Records Linux's own answer to the guest's own data breakpoints (issue 28): the static program
# guest-images/programs/ptrace-watch.c (a parent sets DR0/DR7 of its forked child with ptrace
# PTRACE_POKEUSER, the child writes its variable 5 times, the parent counts the SIGTRAPs) run as
# the workload of the kernel kpemu boots, under QEMU TCG (which emulates the debug registers).
# arm64: guest-images/programs/ptrace-watch-arm64.c (DBGWVR0/DBGWCR0 through PTRACE_SETREGSET
# NT_ARM_HW_WATCH; each trap comes before the store, the parent steps over it with the watchpoint
# off, as gdb does).
#
#   guest-images/record-ptrace-watch.sh [--kernel debian[:SUITE[@RELEASE]]] x86_64|arm64
#     writes guest-images/reference/ARCH/SERIES/ptrace-watch.out  (the program's lines and exit status)
# Needs qemu-system-x86/-arm and gcc with a static libc (x86_64: gcc; arm64: aarch64-linux-gnu-gcc;
# installed with apt-get when missing, as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-ptrace-watch
. "$here/qemu-reference.sh"

reference_args "record-ptrace-watch.sh [--kernel debian[:SUITE[@RELEASE]]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-ptrace-watch.sh [--kernel debian[:SUITE[@RELEASE]]] x86_64|arm64"
case "$arch" in
  x86_64) source=ptrace-watch.c ;;       # x86's DR0/DR7 through PTRACE_POKEUSER
  arm64) source=ptrace-watch-arm64.c ;;  # DBGWVR0/DBGWCR0 through PTRACE_SETREGSET NT_ARM_HW_WATCH
  *) die "x86_64 or arm64" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=$("$here/static-cc.sh" "$arch")
"$cc" -static -O2 -o "$work/ptrace-watch" "$here/programs/$source" || die "$cc could not build $source"

cat > "$work/init" <<'INIT'
#!/bin/sh
export PATH=/bin:/usr/bin
mount -t proc proc /proc
echo KPEMU-PTRACE-BEGIN
/usr/bin/ptrace-watch
echo "ptrace-watch: exit $?"
echo KPEMU-PTRACE-END
poweroff -f
INIT
initramfs=$(kpemu_cli initramfs --arch "$arch" --init "$work/init" --add "$work/ptrace-watch:/usr/bin/ptrace-watch" -o "$work/initramfs.cpio")
log="$work/console.log"
qemu_boot "$initramfs" "nokaslr panic=-1" "$log" KPEMU-PTRACE-END
grep -q 'KPEMU-PTRACE-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-PTRACE-END"; }

dir="$here/reference/$arch/$(kernel_series)"
mkdir -p "$dir"
{
  echo "# Linux's own data breakpoints set by ptrace ($([ "$arch" = x86_64 ] && echo DR0/DR7 || echo DBGWVR0/DBGWCR0)), recorded by guest-images/record-ptrace-watch.sh"
  echo "# from guest-images/programs/$source (sha256 $(sha256sum < "$here/programs/$source" | cut -c1-16)) under QEMU TCG."
  kernel_header
  tr -d '\r' < "$log" | sed -n '/^KPEMU-PTRACE-BEGIN/,/^KPEMU-PTRACE-END/p' | grep '^ptrace-watch: '
} > "$dir/ptrace-watch.out"
cat "$dir/ptrace-watch.out"
