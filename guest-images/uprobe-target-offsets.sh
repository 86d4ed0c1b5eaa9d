# Sourced by guest-images/record-uprobes-prog.sh: the probe points of the user program
# (programs/uprobe-target.c, built by build-uprobe-target.sh, not stripped), found with the host's
# binutils (nm, readelf) and recorded with the reference they serve. Changes nothing.
#
# Provides: uprobe_target_offsets FILE, which sets
#   $ut_fact   the file offset of fact (recursive: the return probes)
#   $ut_greet  the file offset of greet (called in a loop and by the forked child)
#   $ut_dive   the file offset of dive (a recursion left by longjmp, then run to its end)
#   $ut_fact_mid  the file offset of fact's third instruction, fact+8, which is inside fact's
#              first block (no branch before it): on x86-64 (-O0: push %rbp 1 byte, mov %rsp,%rbp
#              3, sub $0x10,%rsp 4) and arm64 (4-byte instructions) alike; checked with objdump
# (elf_file_offset and hex_dec come from busybox-offsets.sh.)

# The file offset of the text symbol NAME of FILE.
symbol_file_offset() {
  local f=$1 sym=$2 va
  va=$(nm "$f" | awk -v s="$sym" '$3 == s && ($2 == "T" || $2 == "t") { print $1; exit }')
  [ -n "$va" ] || { echo "uprobe-target-offsets: no text symbol $sym in $f" >&2; return 1; }
  elf_file_offset "$f" "$(hex_dec "$va")"
}

uprobe_target_offsets() {
  ut_fact=$(symbol_file_offset "$1" fact) || return 1
  ut_greet=$(symbol_file_offset "$1" greet) || return 1
  ut_dive=$(symbol_file_offset "$1" dive) || return 1
  ut_fact_mid=$((ut_fact + 8))
  # an instruction starts at fact+8: objdump lists its address
  local va od=objdump
  va=$(nm "$1" | awk '$3 == "fact" { print $1; exit }')
  readelf -h "$1" | grep -q AArch64 && od=aarch64-linux-gnu-objdump
  "$od" -d --disassemble=fact "$1" | grep -qE "^ *$(printf '%x' $((0x$va + 8))):" \
    || { echo "uprobe-target-offsets: no instruction at fact+8 in $1" >&2; return 1; }
}
