#!/usr/bin/env bash
# Records what Linux's OWN accesses to a kernel variable are, as the reference kpemu's data
# watchpoints (dev.kpemu.machine.Watchpoints) are compared against: boots the same Debian kernel and
# default initramfs that kpemu boots under QEMU TCG with its gdbstub (-S: stopped at the first
# instruction), and gdb in batch mode sets a write watchpoint on the variable and prints, at each
# hit until the guest powers off, the pc gdb reports (QEMU's TCG watchpoints, as x86's debug
# registers, stop after the access: the instruction after the accessing one) and the new value.
# The variable's address comes from Linux itself: a first boot prints its /proc/kallsyms line
# (nokaslr, as both boots and kpemu run).
#
#   guest-images/record-watch.sh [--kernel debian[:SUITE][@RELEASE]] [--out FILE] ARCH [VARIABLE]
#     VARIABLE  a data symbol of /proc/kallsyms (default jiffies)
#     writes    guest-images/reference/ARCH/SERIES/watch-VARIABLE.trace: the kernel header, the
#               variable's address, then one "W PC VALUE" line (hex pc, decimal value) per write
#
# Needs qemu-system-* (as record-reference.sh) and gdb for the guest's arch (x86_64: the host's gdb
# or gdb-multiarch; arm64: gdb-multiarch), installed with apt-get when missing and run as root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-watch
. "$here/qemu-reference.sh"
reference_args "record-watch.sh [--kernel debian[:SUITE][@RELEASE]] [--out FILE] x86_64|arm64 [VARIABLE]" "$@"
variable=${name:-jiffies}

gdb=""
if command -v gdb-multiarch >/dev/null; then gdb=gdb-multiarch
elif [ "$arch" = x86_64 ] && [ "$(uname -m)" = x86_64 ] && command -v gdb >/dev/null; then gdb=gdb
else
  [ "$(id -u)" = 0 ] || die "gdb-multiarch is missing; install Debian's gdb-multiarch"
  apt-get install -y gdb-multiarch >/dev/null 2>&1 || die "apt-get install gdb-multiarch failed"
  gdb=gdb-multiarch
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
append="nokaslr panic=-1"

# 1. Linux's own address of the variable
cat > "$work/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
echo 0 > /proc/sys/kernel/kptr_restrict
echo "KPEMU-SYMBOL \$(grep -E ' $variable\$' /proc/kallsyms | head -n1)"
poweroff -f
INIT
kpemu_cli initramfs --arch "$arch" --init "$work/init" -o "$work/symbol.cpio" >/dev/null
qemu_boot "$work/symbol.cpio" "$append" "$work/symbol.log" KPEMU-SYMBOL
address=$(tr -d '\r' < "$work/symbol.log" | sed -nE "s/^KPEMU-SYMBOL ([0-9a-f]{8,16}) [A-Za-z] $variable\$/\1/p" | head -n1)
[ -n "$address" ] || { tail -n 20 "$work/symbol.log" >&2; die "Linux's /proc/kallsyms has no data symbol '$variable'"; }

# 2. the default workload under the gdbstub, a write watchpoint on it
port=$(( 20000 + $$ % 20000 ))
cat > "$work/gdb" <<GDB
set pagination off
set confirm off
target remote :$port
watch *(unsigned long *)0x$address
commands
silent
printf "W %lx %lu\n", \$pc, *(unsigned long *)0x$address
continue
end
continue
GDB
qemu_command "$(kernel_print initramfs)" "$append"
cmd+=(-gdb "tcp::$port" -S)
timeout "${qemu_limit:-600}" "${cmd[@]}" > "$work/console" 2>&1 &
qemu_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
timeout "${qemu_limit:-600}" "$gdb" -batch -x "$work/gdb" > "$work/hits" 2>&1 || true
wait "$qemu_pid" || true
grep -aq "reboot: Power down" "$work/console" || { tail -n 20 "$work/console" >&2; die "the watched boot did not power off"; }
grep -q '^W ' "$work/hits" || { tail -n 20 "$work/hits" >&2; die "gdb reported no write of $variable"; }

series=$(kernel_series)
out=${out:-$here/reference/$arch/$series/watch-$variable.trace}
mkdir -p "$(dirname "$out")"
{
  echo "# Linux's own writes of $variable, recorded by guest-images/record-watch.sh: QEMU TCG's gdbstub write"
  echo "# watchpoint through the boot of the default initramfs to power-off ($append). W PC VALUE:"
  echo "# the pc gdb reports (after the accessing instruction), the value after the write."
  kernel_header
  echo "# gdb: $("$gdb" --version | head -n1)"
  echo "# address: $address"
  grep '^W ' "$work/hits"
} > "$out"
echo "$out: $(grep -c '^W ' "$out") writes of $variable" >&2
