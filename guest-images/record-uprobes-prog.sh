#!/usr/bin/env bash
# Records the Linux kernel's OWN uprobe events on a user's static C program added to the
# initramfs (guest-images/programs/uprobe-target.c, built by build-uprobe-target.sh, added as
# kpemu's `boot --add` adds it: /uprobe-target, through `kpemu initramfs --add`): the probes are
# registered and enabled before the program starts (a program started after registration), entry
# probes with register and string fetchargs on a function called in a loop and by a forked child,
# an entry and a return probe ($retval) on a recursive function. Also the kernel's answer to
# definitions that name a symbol instead of an offset (kpemu's PATH:SYMBOL extension, which
# Linux's uprobe_events does not take). Boots under QEMU TCG with qemu-reference.sh's qemu_boot.
#
#   guest-images/record-uprobes-prog.sh [--kernel debian[:SUITE[@RELEASE]]] ARCH
#     reads  guest-images/reference/uprobes-prog.ARCH.commands  (definitions for the error table)
#            guest-images/reference/uprobes-prog.ARCH.events    (definitions registered for the trace)
#     writes guest-images/reference/ARCH/SERIES/uprobes-prog.error_log  (record-uprobes.sh's block format)
#            guest-images/reference/ARCH/SERIES/uprobes-prog.trace      (event lines, timestamp removed;
#                                                                        '% ' lines: uprobe_profile;
#                                                                        '> ' lines: the program's output)
# In both input files @FACT@ and @GREET@ stand for the file offsets of fact and greet, @FACTMID@
# for fact+8 (an instruction inside fact's first block: a probe that is not a block start), @DIVE@
# for dive (its return probes: a recursion a longjmp leaves, then one that returns)
# (uprobe-target-offsets.sh, from the program's .symtab), written as 0x-hex into the header
# with the program's sha256 (the compiler decides the offsets: a test compares only the same build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-uprobes-prog
. "$here/qemu-reference.sh"
. "$here/busybox-offsets.sh"
. "$here/uprobe-target-offsets.sh"
. "$here/uprobe-recording.sh"

reference_args "record-uprobes-prog.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-uprobes-prog.sh [--kernel debian[:SUITE]] x86_64|arm64"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target=$("$here/build-uprobe-target.sh" "$arch" "${KPEMU_CACHE:-$root/.cache}/uprobe-target/$arch/uprobe-target") || die "cannot build the program"
uprobe_target_offsets "$target" || die "cannot find the probe points in $target"
fact=$(printf '0x%x' "$ut_fact"); greet=$(printf '0x%x' "$ut_greet"); factmid=$(printf '0x%x' "$ut_fact_mid"); dive=$(printf '0x%x' "$ut_dive")
subst() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -e "s/@FACTMID@/$factmid/g" -e "s/@FACT@/$fact/g" -e "s/@GREET@/$greet/g" -e "s/@DIVE@/$dive/g"; }
uprobe_inputs uprobes-prog subst
uprobe_init '/uprobe-target > /out.txt 2>&1
echo "KPEMU-STATUS $?"' "busybox sed 's/^/KPEMU-OUT> /' /out.txt"
uprobe_boot --add "$target:/uprobe-target"
grep -q '^KPEMU-STATUS 0' <(tr -d '\r' < "$log") || die "the program did not exit 0 under QEMU"

dir="$here/reference/$arch/$(kernel_series)"
mkdir -p "$dir"
header() {
  kernel_header
  echo "# program: guest-images/programs/uprobe-target.c ($("$(basename "$("$here/static-cc.sh" "$arch")")" --version | head -n1)), sha256 $(sha256sum < "$target" | cut -c1-16); @FACT@ = $fact (fact), @GREET@ = $greet (greet), @FACTMID@ = $factmid (fact+8), @DIVE@ = $dive (dive), file offsets found by uprobe-target-offsets.sh"
}
{
  echo "# Linux's own answers to uprobe_events writes on a user's program, recorded by guest-images/record-uprobes-prog.sh."
  header
  echo "# definitions: uprobes-prog.$arch.commands; blocks: '> def', '< ok|errno text', '! error_log line', '= uprobe_events line'"
  uprobe_error_blocks
} > "$dir/uprobes-prog.error_log"
{
  echo "# Linux's own uprobe events on a user's program, recorded by guest-images/record-uprobes-prog.sh from the trace file."
  header
  echo "# definitions (uprobes-prog.$arch.events), registered and enabled before the program starts:"
  sed 's/^/#   /' "$work/events.txt"
  echo "# workload: /uprobe-target (its output: '> ' lines; dive(3) longjmps out of its innermost call before dive(2) returns normally; the child is forked after that)"
  echo "# One line per event as the trace file prints it, the timestamp removed; then '% ' lines: uprobe_profile."
  tr -d '\r' < "$log" | sed -nE 's/^KPEMU-OUT> (.*)$/> \1/p'
  uprobe_trace_lines
} > "$dir/uprobes-prog.trace"
echo "recorded $(grep -c '^> ' "$dir/uprobes-prog.error_log") definitions and $(grep -vc '^[#%>]' "$dir/uprobes-prog.trace") events for $arch to $dir"
