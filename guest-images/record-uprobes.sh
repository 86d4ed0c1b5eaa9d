#!/usr/bin/env bash
# Records the Linux kernel's OWN answers to uprobe_events, on the initramfs's static busybox: the
# error table (each definition written alone to an empty uprobe_events: accepted, with the
# listing read back, or refused, with the write's errno and the error_log entry and caret) and a
# trace of uprobe and uretprobe events fired by busybox processes the guest then runs. Boots the
# same kernel and busybox kpemu boots, under QEMU TCG, with an /init that does it all.
#
#   guest-images/record-uprobes.sh [--kernel debian[:SUITE[@RELEASE]]] ARCH
#     reads  guest-images/reference/uprobes.ARCH.commands   (definitions for the error table)
#            guest-images/reference/uprobes.ARCH.events     (definitions registered for the trace)
#     writes guest-images/reference/ARCH/SERIES/uprobes.error_log  (record-error-log.sh's block format;
#                                                                   '=' lines list uprobe_events)
#            guest-images/reference/ARCH/SERIES/uprobes.trace      (the trace file's event lines with
#                                                                   the timestamp removed; then
#                                                                   '% ' lines: uprobe_profile)
# In both files @ENTRY@ and @TRUE@ stand for file offsets in /bin/busybox that busybox-offsets.sh
# finds in the stripped binary (its ELF entry, _start, run by every exec of busybox; and the
# 'true' applet's main, which returns 0): written as 0x-hex, recorded in the header.
# The trace's workload: after the events are enabled, /init runs '/bin/busybox true' twice and
# 'busybox true one two' once (each an exec of busybox, which goes through _start and true_main).
# Needs qemu-system-x86 / qemu-system-arm (installed with apt-get when missing and run as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-uprobes
. "$here/qemu-reference.sh"
. "$here/busybox-offsets.sh"
. "$here/uprobe-recording.sh"

reference_args "record-uprobes.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-uprobes.sh [--kernel debian[:SUITE]] x86_64|arm64"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
busybox=$("$here/fetch-busybox.sh" "$arch")
busybox_offsets "$busybox" || die "cannot find the probe points in $busybox"
entry=$(printf '0x%x' "$bb_entry"); truemain=$(printf '0x%x' "$bb_true_main")
subst() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -e "s/@ENTRY@/$entry/g" -e "s/@TRUE@/$truemain/g"; }
uprobe_inputs uprobes subst
uprobe_init '/bin/busybox true
/bin/busybox true
busybox true one two'
uprobe_boot

dir="$here/reference/$arch/$(kernel_series)"
mkdir -p "$dir"
header() {
  kernel_header
  echo "# busybox: $(sed -n 's/^version=//p' "${busybox%/*}/busybox.version") ($(sha256sum < "$busybox" | cut -c1-16)); @ENTRY@ = $entry (_start), @TRUE@ = $truemain (true_main), file offsets found by busybox-offsets.sh"
}
{
  echo "# Linux's own answers to uprobe_events writes, recorded by guest-images/record-uprobes.sh."
  header
  echo "# definitions: uprobes.$arch.commands; blocks: '> def', '< ok|errno text', '! error_log line', '= uprobe_events line'"
  uprobe_error_blocks
} > "$dir/uprobes.error_log"
{
  echo "# Linux's own uprobe events, recorded by guest-images/record-uprobes.sh from the trace file."
  header
  echo "# definitions (uprobes.$arch.events):"
  sed 's/^/#   /' "$work/events.txt"
  echo "# workload: /bin/busybox true; /bin/busybox true; busybox true one two"
  echo "# One line per event as the trace file prints it, the timestamp removed; then '% ' lines: uprobe_profile."
  uprobe_trace_lines
} > "$dir/uprobes.trace"
echo "recorded $(grep -c '^> ' "$dir/uprobes.error_log") definitions and $(grep -vc '^[#%]' "$dir/uprobes.trace") events for $arch to $dir"
