#!/usr/bin/env bash
# Records what Linux's OWN accesses to a kernel variable are, as the reference kpemu's data
# watchpoints (dev.kpemu.machine.Watchpoints) are compared against: boots the same Debian kernel and
# default initramfs that kpemu boots under QEMU TCG with its gdbstub (-S: stopped at the first
# instruction), and gdb in batch mode sets a write watchpoint on the variable and prints, at each
# hit until the guest powers off, the pc gdb reports (QEMU's TCG watchpoints, as x86's debug
# registers, stop after the access: the instruction after the accessing one) and the new value.
# The variable's address comes from Linux itself: a first boot prints its /proc/kallsyms line
# (nokaslr, as both boots and kpemu run), or, with --system-map, the kernel build's System.map
# (Debian's arm64 kallsyms has no data symbols; a kernel built by guest-images/build-kernel.sh has
# the System.map of its vmlinux: `nm -n vmlinux`, as Linux's scripts/mksysmap writes it). nokaslr
# keeps the link-time address on both arches. With --current-at FUNCTION the address is the task
# Linux runs when it first reaches FUNCTION (arm64: SP_EL0, where Linux keeps `current` in the
# kernel), read by gdb at a hardware breakpoint there in a boot of its own: `init_task --current-at
# start_kernel` (head.S points SP_EL0 at init_task before start_kernel) finds init_task on Debian's
# arm64 kernel, whose kallsyms has no data symbols and whose System.map is only in the -dbg package.
#
#   guest-images/record-watch.sh [--kernel debian[:SUITE][@RELEASE]|FILE] [--system-map FILE] [--out FILE] ARCH [VARIABLE]
#     --kernel FILE  a kernel file (e.g. build-kernel.sh's bzImage or Image), booted with the default initramfs
#     VARIABLE  a data symbol of /proc/kallsyms or of the System.map (default jiffies)
#     --access w|r|rw  gdb's watch, rwatch or awatch (default w); r and rw write "R PC VALUE" lines
#               for reads (gdb's "Value =") beside the "W PC VALUE" lines of writes ("New value =")
#     --current-at FUNCTION  (arm64) VARIABLE's address is `current` (SP_EL0) when the kernel first runs
#               FUNCTION, a text symbol of /proc/kallsyms, e.g. init_task --current-at start_kernel
#     --offset N  bytes past the symbol
#     --field STRUCT.MEMBER  bytes past the symbol: the member's offset in the kernel's own BTF
#               (pahole on the booted vmlinux), e.g. init_task --field task_struct.nivcsw
#     --length 1|2|4|8  the watched length (default 8), the printed value's size
#     --hits N  only the first N writes: gdb then deletes the watchpoint and the boot goes on unwatched (a watched
#               arm64 boot under a busy host's TCG outlasts the time limit: every hit is a gdb round trip)
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
usage="record-watch.sh [--kernel debian[:SUITE][@RELEASE]|FILE] [--system-map FILE|--current-at FUNCTION] [--access w|r|rw] [--offset N|--field STRUCT.MEMBER] [--length N] [--hits N] [--out FILE] x86_64|arm64 [VARIABLE]"
system_map=""; current_at=""; hits=""; access=w; offset=0; field=""; length=8; rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --system-map) [ $# -ge 2 ] || { echo "$prog: usage: $usage" >&2; exit 2; }; system_map=$2; shift 2 ;;
    --system-map=*) system_map=${1#--system-map=}; shift ;;
    --current-at) [ $# -ge 2 ] && [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_.]*$ ]] || { echo "$prog: --current-at takes a function; usage: $usage" >&2; exit 2; }; current_at=$2; shift 2 ;;
    --access) [ $# -ge 2 ] && [[ $2 =~ ^(w|r|rw)$ ]] || { echo "$prog: --access takes w, r or rw; usage: $usage" >&2; exit 2; }; access=$2; shift 2 ;;
    --offset) [ $# -ge 2 ] && [[ $2 =~ ^(0|[1-9][0-9]*)$ ]] || { echo "$prog: --offset takes a byte count; usage: $usage" >&2; exit 2; }; offset=$2; shift 2 ;;
    --field) [ $# -ge 2 ] && [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "$prog: --field takes STRUCT.MEMBER; usage: $usage" >&2; exit 2; }; field=$2; shift 2 ;;
    --length) [ $# -ge 2 ] && [[ $2 =~ ^(1|2|4|8)$ ]] || { echo "$prog: --length takes 1, 2, 4 or 8; usage: $usage" >&2; exit 2; }; length=$2; shift 2 ;;
    --hits) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "$prog: --hits takes a positive count; usage: $usage" >&2; exit 2; }; hits=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
[ -z "$system_map" ] || [ -f "$system_map" ] || { echo "$prog: --system-map: no file '$system_map'" >&2; exit 2; }
reference_args "$usage" "${rest[@]}"
[ -z "$current_at" ] || [ "$arch" = arm64 ] || { echo "$prog: --current-at reads arm64's SP_EL0: arm64 only" >&2; exit 2; }
[ -z "$current_at" ] || [ -z "$system_map" ] || { echo "$prog: --current-at and --system-map both give the address: one of them" >&2; exit 2; }
if [ -n "$field" ]; then
  offset=$(btf_offset "${field%%.*}" "${field#*.}")
  [[ $offset =~ ^[0-9]+$ ]] || die "the kernel's BTF has no member ${field#*.} in struct ${field%%.*}"
fi
variable=${name:-jiffies}

gdb=""
if command -v gdb-multiarch >/dev/null; then gdb=gdb-multiarch
elif [ "$arch" = x86_64 ] && [ "$(uname -m)" = x86_64 ] && command -v gdb >/dev/null; then gdb=gdb
else
  [ "$(id -u)" = 0 ] || die "gdb-multiarch is missing; install Debian's gdb-multiarch"
  command -v apt-get >/dev/null || die "gdb-multiarch is missing and apt-get is not available"
  { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gdb-multiarch \
    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gdb-multiarch; }; } >/dev/null 2>&1 \
    || die "apt-get install gdb-multiarch failed"
  gdb=gdb-multiarch
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
append="nokaslr panic=-1"

port=$(( 20000 + $$ % 20000 ))
# 1. Linux's own address of the variable: its System.map, `current` at a function (the function's
# address from a first boot's /proc/kallsyms), or its /proc/kallsyms in a first boot
symbol=$variable; [ -z "$current_at" ] || symbol=$current_at
if [ -n "$system_map" ]; then
  address=$(awk -v v="$variable" '$3 == v && $2 ~ /^[bBdDrRgGsSvV]$/ { print $1; exit }' "$system_map")
  [ -n "$address" ] || die "$system_map has no data symbol '$variable'"
else
cat > "$work/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
echo 0 > /proc/sys/kernel/kptr_restrict
echo "KPEMU-SYMBOL \$(grep -E ' $symbol\$' /proc/kallsyms | head -n1)"
poweroff -f
INIT
kpemu_cli initramfs --arch "$arch" --init "$work/init" -o "$work/symbol.cpio" >/dev/null
qemu_boot "$work/symbol.cpio" "$append" "$work/symbol.log" KPEMU-SYMBOL
address=$(tr -d '\r' < "$work/symbol.log" | sed -nE "s/^KPEMU-SYMBOL ([0-9a-f]{8,16}) [A-Za-z] $symbol\$/\1/p" | head -n1)
[ -n "$address" ] || { tail -n 20 "$work/symbol.log" >&2; die "Linux's /proc/kallsyms has no symbol '$symbol'"; }
fi
if [ -n "$current_at" ]; then
  # a boot of its own, stopped at FUNCTION's first instruction (a gdbstub hardware breakpoint: the
  # MMU is still off at the first instruction), SP_EL0 read there, the guest killed
  cat > "$work/current" <<GDB
set pagination off
set confirm off
target remote :$port
hbreak *0x$address
continue
printf "KPEMU-CURRENT %lx %lx\n", \$pc, \$SP_EL0
kill
GDB
  qemu_command "$(kernel_print initramfs)" "$append"
  cmd+=(-gdb "tcp::$port" -S)
  timeout 120 "${cmd[@]}" > "$work/current.console" 2>&1 &
  qemu_pid=$!
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  timeout 120 "$gdb" -batch -x "$work/current" > "$work/current.out" 2>&1 || true
  wait "$qemu_pid" || true
  read -r at task < <(sed -nE 's/^KPEMU-CURRENT ([0-9a-f]+) ([0-9a-f]+)$/\1 \2/p' "$work/current.out")
  [ "${at:-}" = "$address" ] && [[ ${task:-} =~ ^ffff[0-9a-f]{12}$ ]] \
    || { tail -n 20 "$work/current.out" >&2; die "gdb read no kernel SP_EL0 at $current_at ($address)"; }
  current_fn_address=$address
  address=$task
fi

# 2. the default workload under the gdbstub, a watchpoint on it
symbol_address=$address
address=$(printf '%x' $(( 0x$address + offset )))
case "$length" in 1) ctype="unsigned char" ;; 2) ctype="unsigned short" ;; 4) ctype="unsigned int" ;; 8) ctype="unsigned long" ;; esac
case "$access" in w) gwatch=watch; quiet=silent ;; r) gwatch=rwatch; quiet="" ;; rw) gwatch=awatch; quiet="" ;; esac
cat > "$work/gdb" <<GDB
set pagination off
set confirm off
target remote :$port
set \$hits = 0
$gwatch *($ctype *)0x$address
commands
$quiet
printf "@ %lx %lu\n", \$pc, *($ctype *)0x$address
set \$hits = \$hits + 1
if \$hits == ${hits:-0}
  delete
end
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
# gdb's report of each hit: "New value =" a write, "Value =" a read (rwatch, awatch); w: all writes
awk -v access="$access" '/^New value = /{kind="W"} /^Value = /{kind="R"}
  /^@ /{ if (access == "w") kind = "W"; print kind, $2, $3; kind = "" }' "$work/hits" > "$work/accesses"
[ -s "$work/accesses" ] || { tail -n 20 "$work/hits" >&2; die "gdb reported no access of $variable"; }

series=$(kernel_series)
suffix=""; [ "$offset" = 0 ] || suffix="+$offset"; [ "$access" = w ] || suffix="$suffix-$access"
out=${out:-$here/reference/$arch/$series/watch-$variable$suffix.trace}
mkdir -p "$(dirname "$out")"
{
  echo "# Linux's own accesses ($access) of $variable${suffix%-*}:$length, recorded by guest-images/record-watch.sh: QEMU TCG's"
  echo "# gdbstub $gwatch watchpoint through the boot of the default initramfs ${hits:+(its first $hits hits) }to power-off ($append)."
  echo "# W|R PC VALUE: the pc gdb reports (after the accessing instruction), the value after the access."
  kernel_header
  echo "# gdb: $("$gdb" --version | head -n1)"
  echo "# address: $address"
  [ "$offset" = 0 ] || echo "# symbol: $variable $symbol_address + $offset${field:+ ($field in the kernel BTF)}"
  if [ -n "$current_at" ]; then echo "# address from: SP_EL0 (current) at $current_at ($current_fn_address in /proc/kallsyms), read by gdb"
  else echo "# address from: ${system_map:+System.map (nm -n vmlinux)}${system_map:-/proc/kallsyms}"; fi
  cat "$work/accesses"
} > "$out"
echo "$out: $(grep -c '^W ' "$out") writes, $(grep -c '^R ' "$out") reads of $variable${suffix%-*}" >&2
