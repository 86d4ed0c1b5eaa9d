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

reference_args "record-uprobes.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-uprobes.sh [--kernel debian[:SUITE]] x86_64|arm64"
defs="$here/reference/uprobes.$arch.commands"
evs="$here/reference/uprobes.$arch.events"
[ -f "$defs" ] || die "no definitions file $defs"
[ -f "$evs" ] || die "no events file $evs"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
busybox=$("$here/fetch-busybox.sh" "$arch")
busybox_offsets "$busybox" || die "cannot find the probe points in $busybox"
entry=$(printf '0x%x' "$bb_entry"); truemain=$(printf '0x%x' "$bb_true_main")
subst() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -e "s/@ENTRY@/$entry/g" -e "s/@TRUE@/$truemain/g"; }
subst "$defs" > "$work/defs.txt" || die "$defs has no definitions"
subst "$evs" > "$work/events.txt" || die "$evs has no definitions"

cat > "$work/init" <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tracefs tracefs /sys/kernel/tracing
T=/sys/kernel/tracing
echo KPEMU-ERRLOG-BEGIN
while IFS= read -r def; do
  : > $T/uprobe_events
  : > $T/error_log
  busybox printf 'KPEMU-DEF> %s\n' "$def"
  if out=$(echo "$def" 2>&1 >> $T/uprobe_events); then echo "KPEMU-RC< ok"; else echo "KPEMU-RC< ${out##*: }"; fi
  busybox sed -e 's/^\[[ 0-9.]*\] //' -e 's/^/KPEMU-LOG! /' $T/error_log
  busybox sed 's/^/KPEMU-LIST= /' $T/uprobe_events
done < /defs.txt
: > $T/uprobe_events
echo KPEMU-ERRLOG-END
: > $T/error_log
while IFS= read -r def; do
  echo "$def" >> $T/uprobe_events || { echo "KPEMU-EVENT-REFUSED $def"; busybox sed 's/^/KPEMU-EVENT-REFUSED /' $T/error_log; }
done < /events.txt
for ev in $(busybox sed -E 's/^[pr]:([^ ]+) .*/\1/' $T/uprobe_events); do echo 1 > $T/events/$ev/enable; done
/bin/busybox true
/bin/busybox true
busybox true one two
echo 0 > $T/tracing_on
echo KPEMU-TRACE-BEGIN
busybox sed -e '/^#/d' -e 's/^/KPEMU-TRACE| /' $T/trace
busybox sed -e 's/^/KPEMU-PROFILE% /' $T/uprobe_profile
echo KPEMU-TRACE-END
poweroff -f
INIT
initramfs=$(kpemu_cli initramfs --arch "$arch" --init "$work/init" --add "$work/defs.txt:/defs.txt" --add "$work/events.txt:/events.txt" -o "$work/initramfs.cpio")
log="$work/console.log"
qemu_boot "$initramfs" "nokaslr panic=-1" "$log" KPEMU-TRACE-END
grep -q 'KPEMU-TRACE-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-TRACE-END"; }
if grep -q 'KPEMU-EVENT-REFUSED' "$log"; then grep 'KPEMU-EVENT-REFUSED' "$log" >&2; die "the kernel refused a definition of $evs"; fi

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
  tr -d '\r' < "$log" | sed -n '/^KPEMU-ERRLOG-BEGIN/,/^KPEMU-ERRLOG-END/p' \
    | sed -nE -e 's/^KPEMU-(DEF|RC|LOG|LIST)([<>!=]) ?(.*)$/\2 \3/p' -e 's/^\[ *[0-9]+\.[0-9]+\] (trace_uprobe: .*)$/~ \1/p'
} > "$dir/uprobes.error_log"
{
  echo "# Linux's own uprobe events, recorded by guest-images/record-uprobes.sh from the trace file."
  header
  echo "# definitions (uprobes.$arch.events):"
  sed 's/^/#   /' "$work/events.txt"
  echo "# workload: /bin/busybox true; /bin/busybox true; busybox true one two"
  echo "# One line per event as the trace file prints it, the timestamp removed; then '% ' lines: uprobe_profile."
  tr -d '\r' < "$log" | sed -n '/^KPEMU-TRACE-BEGIN/,/^KPEMU-TRACE-END/p' \
    | LC_ALL=C sed -nE -e 's/^KPEMU-TRACE\| ( *[^ ].*-[0-9]+ +\[[0-9]+\] [^ ]+) +[0-9]+\.[0-9]{6}: (.*)$/\1 \2/p' -e 's/^KPEMU-PROFILE% (.*)$/% \1/p'
} > "$dir/uprobes.trace"
echo "recorded $(grep -c '^> ' "$dir/uprobes.error_log") definitions and $(grep -vc '^[#%]' "$dir/uprobes.trace") events for $arch to $dir"
