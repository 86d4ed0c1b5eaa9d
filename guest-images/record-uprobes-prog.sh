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
# In both input files @FACT@ and @GREET@ stand for the file offsets of fact and greet
# (uprobe-target-offsets.sh, from the program's .symtab), written as 0x-hex into the header
# with the program's sha256 (the compiler decides the offsets: a test compares only the same build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-uprobes-prog
. "$here/qemu-reference.sh"
. "$here/busybox-offsets.sh"
. "$here/uprobe-target-offsets.sh"

reference_args "record-uprobes-prog.sh [--kernel debian[:SUITE]] x86_64|arm64" "$@"
[ -z "$name" ] || die "usage: record-uprobes-prog.sh [--kernel debian[:SUITE]] x86_64|arm64"
defs="$here/reference/uprobes-prog.$arch.commands"
evs="$here/reference/uprobes-prog.$arch.events"
[ -f "$defs" ] || die "no definitions file $defs"
[ -f "$evs" ] || die "no events file $evs"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target=$("$here/build-uprobe-target.sh" "$arch" "${KPEMU_CACHE:-$root/.cache}/uprobe-target/$arch/uprobe-target") || die "cannot build the program"
uprobe_target_offsets "$target" || die "cannot find the probe points in $target"
fact=$(printf '0x%x' "$ut_fact"); greet=$(printf '0x%x' "$ut_greet")
subst() { grep -vE '^[[:space:]]*(#|$)' "$1" | sed -e "s/@FACT@/$fact/g" -e "s/@GREET@/$greet/g"; }
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
/uprobe-target > /out.txt 2>&1
echo "KPEMU-STATUS $?"
echo 0 > $T/tracing_on
busybox sed 's/^/KPEMU-OUT> /' /out.txt
echo KPEMU-TRACE-BEGIN
busybox sed -e '/^#/d' -e 's/^/KPEMU-TRACE| /' $T/trace
busybox sed -e 's/^/KPEMU-PROFILE% /' $T/uprobe_profile
echo KPEMU-TRACE-END
poweroff -f
INIT
initramfs=$(kpemu_cli initramfs --arch "$arch" --init "$work/init" --add "$target:/uprobe-target" --add "$work/defs.txt:/defs.txt" \
    --add "$work/events.txt:/events.txt" -o "$work/initramfs.cpio")
log="$work/console.log"
qemu_boot "$initramfs" "nokaslr panic=-1" "$log" KPEMU-TRACE-END
grep -q 'KPEMU-TRACE-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-TRACE-END"; }
if grep -q 'KPEMU-EVENT-REFUSED' "$log"; then grep 'KPEMU-EVENT-REFUSED' "$log" >&2; die "the kernel refused a definition of $evs"; fi
grep -q '^KPEMU-STATUS 0' <(tr -d '\r' < "$log") || die "the program did not exit 0 under QEMU"

dir="$here/reference/$arch/$(kernel_series)"
mkdir -p "$dir"
header() {
  kernel_header
  echo "# program: guest-images/programs/uprobe-target.c ($("$(basename "$("$here/static-cc.sh" "$arch")")" --version | head -n1)), sha256 $(sha256sum < "$target" | cut -c1-16); @FACT@ = $fact (fact), @GREET@ = $greet (greet), file offsets found by uprobe-target-offsets.sh"
}
{
  echo "# Linux's own answers to uprobe_events writes on a user's program, recorded by guest-images/record-uprobes-prog.sh."
  header
  echo "# definitions: uprobes-prog.$arch.commands; blocks: '> def', '< ok|errno text', '! error_log line', '= uprobe_events line'"
  tr -d '\r' < "$log" | sed -n '/^KPEMU-ERRLOG-BEGIN/,/^KPEMU-ERRLOG-END/p' \
    | sed -nE -e 's/^KPEMU-(DEF|RC|LOG|LIST)([<>!=]) ?(.*)$/\2 \3/p' -e 's/^\[ *[0-9]+\.[0-9]+\] (trace_uprobe: .*)$/~ \1/p'
} > "$dir/uprobes-prog.error_log"
{
  echo "# Linux's own uprobe events on a user's program, recorded by guest-images/record-uprobes-prog.sh from the trace file."
  header
  echo "# definitions (uprobes-prog.$arch.events), registered and enabled before the program starts:"
  sed 's/^/#   /' "$work/events.txt"
  echo "# workload: /uprobe-target (its output: '> ' lines; the child is forked after 'fact(4) = 24')"
  echo "# One line per event as the trace file prints it, the timestamp removed; then '% ' lines: uprobe_profile."
  tr -d '\r' < "$log" | sed -nE 's/^KPEMU-OUT> (.*)$/> \1/p'
  tr -d '\r' < "$log" | sed -n '/^KPEMU-TRACE-BEGIN/,/^KPEMU-TRACE-END/p' \
    | LC_ALL=C sed -nE -e 's/^KPEMU-TRACE\| ( *[^ ].*-[0-9]+ +\[[0-9]+\] [^ ]+) +[0-9]+\.[0-9]{6}: (.*)$/\1 \2/p' -e 's/^KPEMU-PROFILE% (.*)$/% \1/p'
} > "$dir/uprobes-prog.trace"
echo "recorded $(grep -c '^> ' "$dir/uprobes-prog.error_log") definitions and $(grep -vc '^[#%>]' "$dir/uprobes-prog.trace") events for $arch to $dir"
