#!/usr/bin/env bash
# Records the Linux kernel's OWN uprobe events on a dynamically linked program and in Debian's C
# library (guest-images/programs/uprobe-target.c built by build-uprobe-target-dyn.sh, with the
# loader and libc.so.6 of Debian's libc6 for the guest arch, added to the initramfs as kpemu's
# `boot --add` adds them): a probe by offset in the program, and an entry and a return probe on
# libc's printf, which the program calls through its PLT (the library is mapped by the loader's
# mmap, not by exec). The probes are registered and enabled before the program starts. Boots under
# QEMU TCG with qemu-reference.sh's qemu_boot.
#
#   guest-images/record-uprobes-dyn.sh [--kernel debian[:SUITE[@RELEASE]]] ARCH
#     reads  guest-images/reference/uprobes-dyn.ARCH.commands  (definitions for the error table)
#            guest-images/reference/uprobes-dyn.ARCH.events    (definitions registered for the trace)
#     writes guest-images/reference/ARCH/SERIES/uprobes-dyn.error_log  (record-uprobes.sh's block format)
#            guest-images/reference/ARCH/SERIES/uprobes-dyn.trace      (as uprobes-prog.trace)
# In both input files @GREET@ stands for the program's file offset of greet and @PRINTF@ for
# libc.so.6's file offset of printf (its .dynsym), written as 0x-hex into the header with both
# files' sha256 (another build gives other offsets: a test compares only the same files).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-uprobes-dyn
. "$here/qemu-reference.sh"
. "$here/busybox-offsets.sh"
. "$here/uprobe-target-offsets.sh"
. "$here/uprobe-recording.sh"

reference_args "record-uprobes-dyn.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-uprobes-dyn.sh [--kernel debian[:SUITE]] x86_64|arm64"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t files < <("$here/build-uprobe-target-dyn.sh" "$arch" "${KPEMU_CACHE:-$root/.cache}/uprobe-target-dyn/$arch") || die "cannot build the program"
[ ${#files[@]} -eq 3 ] || die "build-uprobe-target-dyn.sh gave ${#files[@]} files, not 3"
target=${files[0]%%:*}
libc_host=${files[2]%%:*}; libc_guest=${files[2]#*:}
greet=$(printf '0x%x' "$(symbol_file_offset "$target" greet)") || die "no greet in $target"
printf_va=$(nm -D "$libc_host" | awk '$2 == "T" && $3 ~ /^printf(@|$)/ && !n++ { print $1 }')
[ -n "$printf_va" ] || die "no printf in $libc_host's .dynsym"
printf_off=$(printf '0x%x' "$(elf_file_offset "$libc_host" "$(hex_dec "$printf_va")")")
subst() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -e "s/@GREET@/$greet/g" -e "s/@PRINTF@/$printf_off/g"; }
uprobe_inputs uprobes-dyn subst
# without address-space randomisation (the program is PIE; libc goes where mmap puts it): the
# addresses in the trace are then the same on every run and under kpemu
uprobe_init 'echo 0 > /proc/sys/kernel/randomize_va_space
/uprobe-target-dyn > /out.txt 2>&1
echo "KPEMU-STATUS $?"' "busybox sed 's/^/KPEMU-OUT> /' /out.txt"
adds=()
for f in "${files[@]}"; do adds+=(--add "$f"); done
uprobe_boot "${adds[@]}"
grep -q '^KPEMU-STATUS 0' <(tr -d '\r' < "$log") || { tail -n 20 "$log" >&2; die "the program did not exit 0 under QEMU"; }

dir="$here/reference/$arch/$(kernel_series)"
mkdir -p "$dir"
header() {
  kernel_header
  echo "# program: guest-images/programs/uprobe-target.c, dynamic ($("$(basename "$("$here/static-cc.sh" "$arch")")" --version | head -n1)), sha256 $(sha256sum < "$target" | cut -c1-16); libc: $libc_guest ($(dpkg-query -W -f='${Package} ${Version}' "$([ "$arch" = x86_64 ] && echo libc6:amd64 || echo libc6-arm64-cross)")), sha256 $(sha256sum < "$libc_host" | cut -c1-16); @GREET@ = $greet (greet), @PRINTF@ = $printf_off (printf)"
}
{
  echo "# Linux's own answers to uprobe_events writes on a dynamically linked program and libc, recorded by guest-images/record-uprobes-dyn.sh."
  header
  echo "# definitions: uprobes-dyn.$arch.commands; blocks: '> def', '< ok|errno text', '! error_log line', '= uprobe_events line'"
  uprobe_error_blocks
} > "$dir/uprobes-dyn.error_log"
{
  echo "# Linux's own uprobe events on a dynamically linked program and in libc, recorded by guest-images/record-uprobes-dyn.sh from the trace file."
  header
  echo "# definitions (uprobes-dyn.$arch.events), registered and enabled before the program starts:"
  sed 's/^/#   /' "$work/events.txt"
  echo "# workload: /uprobe-target-dyn with randomize_va_space 0 (its output: '> ' lines)"
  echo "# One line per event as the trace file prints it, the timestamp removed; then '% ' lines: uprobe_profile."
  tr -d '\r' < "$log" | sed -nE 's/^KPEMU-OUT> (.*)$/> \1/p'
  uprobe_trace_lines
} > "$dir/uprobes-dyn.trace"
echo "recorded $(grep -c '^> ' "$dir/uprobes-dyn.error_log") definitions and $(grep -vc '^[#%>]' "$dir/uprobes-dyn.trace") events for $arch to $dir"
