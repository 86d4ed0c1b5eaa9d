#!/usr/bin/env bash
# Records Linux's own accesses of a slab object found at run time, as the reference kpemu's
# set_wprobe triggers are compared against: the f_pos of the struct file a command opens. Under
# QEMU TCG's gdbstub (as record-watch.sh), gdb (batch, Python) stops at do_filp_open's entry, sets a
# breakpoint at its return address, and there, when the current task's comm is the command's and
# the returned struct file * is not an error, sets `awatch -l` on the file's f_pos; filp_close of that file deletes it. The guest's /init runs the command once
# (nokaslr: the addresses of a first boot's /proc/kallsyms hold in the second). The offsets of
# file.f_pos and task_struct.comm come from the kernel's own BTF (Debian's pahole, installed
# with apt-get as root when missing); --fpos/--comm-offset override them.
#
#   guest-images/record-watch-file.sh [--kernel debian[:SUITE][@RELEASE]] [--out FILE] [--fpos OFFSET] [--comm-offset OFFSET] x86_64|arm64 'COMMAND'
#     writes  OUT (default guest-images/reference/ARCH/SERIES/watch-file-fpos.trace): the kernel header,
#             then one "W|R PC VALUE" line per access of f_pos (pc as gdb reports it, value after the access;
#             W: the value changed, as gdb's awatch tells a write)
# The current task: x86-64 gs_base + current_task (as Linux 6.1 keeps it), arm64 SP_EL0 (in the
# kernel); the return address: x86-64 the word at rsp, arm64 x30 at the entry; the result and
# filp_close's file: rax/rdi, x0. arm64's offsets come with --fpos/--comm-offset (pahole reads
# only x86-64's vmlinux here; kpemu's KernelStructs gives the same BTF's offsets).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-watch-file
. "$here/qemu-reference.sh"
usage="record-watch-file.sh [--kernel debian[:SUITE][@RELEASE]] [--out FILE] [--fpos OFFSET] [--comm-offset OFFSET] x86_64|arm64 'COMMAND'"
fpos=""; commoff=""; rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fpos) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || { echo "$prog: usage: $usage" >&2; exit 2; }; fpos=$2; shift 2 ;;
    --comm-offset) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || { echo "$prog: usage: $usage" >&2; exit 2; }; commoff=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
reference_args "$usage" "${rest[@]}"
case "$arch" in x86_64|arm64) ;; *) die "x86_64 or arm64" ;; esac
command_line=$name
[ -n "$command_line" ] || { echo "$prog: usage: $usage" >&2; exit 2; }
comm=${command_line%% *}; comm=${comm##*/}
gdb=gdb-multiarch
[ "$arch" = arm64 ] || command -v "$gdb" >/dev/null || gdb=gdb
command -v "$gdb" >/dev/null || die "gdb is missing; install Debian's gdb-multiarch"

if [ -z "$fpos" ] || [ -z "$commoff" ]; then
  [ -n "$fpos" ] || fpos=$(btf_offset file f_pos)
  [ -n "$commoff" ] || commoff=$(btf_offset task_struct comm)
  [[ $fpos =~ ^[0-9]+$ && $commoff =~ ^[0-9]+$ ]] || die "the kernel's BTF gives no offset of file.f_pos or task_struct.comm (pahole on $(kernel_print vmlinux))"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
append="nokaslr panic=-1"

cat > "$work/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
echo 0 > /proc/sys/kernel/kptr_restrict
for s in do_filp_open filp_close $([ "$arch" = x86_64 ] && echo current_task); do echo "KPEMU-SYMBOL \$(grep -E " \$s\\\$" /proc/kallsyms | head -n1)"; done
echo KPEMU-RUN-BEGIN
$command_line
echo KPEMU-RUN-END
poweroff -f
INIT
kpemu_cli initramfs --arch "$arch" --init "$work/init" -o "$work/run.cpio" >/dev/null
qemu_boot "$work/run.cpio" "$append" "$work/symbol.log" KPEMU-RUN-END
sym() { tr -d '\r' < "$work/symbol.log" | sed -nE "s/^KPEMU-SYMBOL ([0-9a-f]+) [A-Za-z] $1\$/\1/p" | head -n1; }
open_at=$(sym do_filp_open); close_at=$(sym filp_close); current=0
[ "$arch" = arm64 ] || current=$(sym current_task)
[ -n "$open_at" ] && [ -n "$close_at" ] && [ -n "$current" ] || { tail -n 20 "$work/symbol.log" >&2; die "no kallsyms lines for do_filp_open, filp_close, current_task"; }

port=$(( 20000 + $$ % 20000 ))
cat > "$work/watch.py" <<PY
import gdb, re
gdb.execute("set pagination off"); gdb.execute("set confirm off")
gdb.execute("target remote :$port")
OPEN, CLOSE, CURRENT, FPOS, COMM = 0x$open_at, 0x$close_at, 0x$current, $fpos, $commoff
ARM64 = "$arch" == "arm64"
want = b"$comm"[:15]
def reg(n): return int(gdb.parse_and_eval("\$" + n)) & (2**64 - 1)
def mem(a, n): return bytes(gdb.selected_inferior().read_memory(a, n))
def u64(a): return int.from_bytes(mem(a, 8), "little")
def current_comm():
    task = reg("SP_EL0") if ARM64 else u64(reg("gs_base") + CURRENT)
    return mem(task + COMM, 16).split(b"\0")[0]
gdb.Breakpoint("*" + hex(OPEN))
gdb.Breakpoint("*" + hex(CLOSE))
returns = set(); watched = None; wp = None
while True:
    try:
        out = gdb.execute("continue", to_string=True)
    except gdb.error:
        break
    pc = reg("pc")
    if pc == OPEN:
        if current_comm() == want:
            ret = reg("x30") if ARM64 else u64(reg("rsp"))
            if ret not in returns:
                returns.add(ret); gdb.Breakpoint("*" + hex(ret))
    elif pc in returns and wp is None:
        f = reg("x0" if ARM64 else "rax")
        if f < 2**64 - 4096 and current_comm() == want:
            watched = f
            wp = gdb.Breakpoint("*(long *)" + hex(f + FPOS), gdb.BP_WATCHPOINT, gdb.WP_ACCESS, internal=False)
            last = u64(f + FPOS)
            gdb.write("OPEN %x\n" % f)
    elif pc == CLOSE:
        if wp is not None and reg("x0" if ARM64 else "rdi") == watched:
            wp.delete(); wp = None
            gdb.write("CLOSE %x\n" % watched)
    elif wp is not None:
        # gdb's awatch: a changed value is a write ("Old value/New value"), else a read ("Value")
        v = u64(watched + FPOS)
        gdb.write("%s %x %d\n" % ("W" if v != last else "R", pc, v))
        last = v
    gdb.flush()
PY
qemu_command "$work/run.cpio" "$append"
cmd+=(-gdb "tcp::$port" -S)
timeout "${qemu_limit:-600}" "${cmd[@]}" > "$work/console" 2>&1 &
qemu_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
timeout "${qemu_limit:-600}" "$gdb" -batch -x "$work/watch.py" > "$work/hits" 2>&1 || true
wait "$qemu_pid" || true
grep -aq "KPEMU-RUN-END" "$work/console" || { tail -n 20 "$work/console" >&2; tail -n 20 "$work/hits" >&2; die "the watched run did not finish"; }
grep -q '^OPEN ' "$work/hits" || { tail -n 20 "$work/hits" >&2; die "gdb saw no file opened by $comm"; }

out=${out:-$here/reference/$arch/$(kernel_series)/watch-file-fpos.trace}
mkdir -p "$(dirname "$out")"
{
  echo "# Linux's own accesses of f_pos (offset $fpos) of the first struct file '$command_line' opens (do_filp_open's return,"
  echo "# current comm '$comm') until its filp_close, recorded by guest-images/record-watch-file.sh: gdb's awatch -l under QEMU TCG's"
  echo "# gdbstub ($append). W|R PC VALUE: the pc gdb reports (after the accessing instruction), the value after the access."
  kernel_header
  echo "# gdb: $("$gdb" --version | head -n1)"
  echo "# command: $command_line"
  grep -E '^(OPEN|CLOSE|W|R) ' "$work/hits" | sed -E 's/^(OPEN|CLOSE) .*/# \1/'
} > "$out"
echo "$out: $(grep -c '^W ' "$out") writes, $(grep -c '^R ' "$out") reads" >&2
