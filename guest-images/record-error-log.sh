#!/usr/bin/env bash
# Records the Linux kernel's OWN answer to kprobe_events definitions: for each definition, whether
# the write to tracefs was accepted (and how kprobe_events then lists it) or refused (the write's
# errno and the error_log entry with its caret). Boots the same kernel that kpemu boots, under QEMU
# TCG, with kpemu's busybox initramfs whose /init writes each definition to
# /sys/kernel/tracing/kprobe_events, one at a time on an empty list; a definition of an event kind
# kprobe_events does not take (an fprobe 'f…' or tracepoint probe 't…', Linux 6.4+) is written to
# dynamic_events instead, and dynamic_events is listed after it.
#
#   guest-images/record-error-log.sh [--kprobes-list] [--kernel debian[:SUITE]] ARCH NAME
#     reads  guest-images/reference/NAME.ARCH.commands          (one definition per line; '#' comments)
#     writes guest-images/reference/ARCH/SERIES/NAME.error_log  (header, then one block per definition)
#   SERIES is the kernel's major.minor, as for record-reference.sh.
#
# Block format (a line starting with "> " opens a block):
#   > DEFINITION           as written
#   < ok | < ERRNO-TEXT    the write's outcome (busybox printf's error text, e.g. "Invalid argument")
#   ! LINE                 error_log lines, timestamp removed (message, "  Command: ...", caret line)
#   = LINE                 kprobe_events (dynamic_events for 'f'/'t' rows) lines after an accepted write
#   ~ LINE                 what the kernel printed to its console about it (trace_kprobe: ...)
#   @ LINE                 with --kprobes-list: debugfs kprobes/list after the accepted event was
#                          enabled and the guest slept 0.3 s (jump optimization waits 5 jiffies)
# Needs qemu-system-x86 / qemu-system-arm (installed with apt-get when missing and run as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-error-log
. "$here/qemu-reference.sh"

kprobes_list=0
if [ "${1:-}" = --kprobes-list ]; then kprobes_list=1; shift; fi
reference_args "record-error-log.sh [--kprobes-list] [--kernel debian[:SUITE]] x86_64|arm64 NAME" "$@"
[ -n "$name" ] || die "usage: record-error-log.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME"
defs="$here/reference/$name.$arch.commands"
[ -f "$defs" ] || die "no definitions file $defs"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -vE '^[[:space:]]*(#|$)' "$defs" > "$work/defs.txt" || die "$defs has no definitions"
cat > "$work/init" <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tracefs tracefs /sys/kernel/tracing
T=/sys/kernel/tracing
LIST=0
[ -e /kprobes-list ] && LIST=1 && mount -t debugfs debugfs /sys/kernel/debug
echo KPEMU-ERRLOG-BEGIN
while IFS= read -r def; do
  case "$def" in f*|t*) F=$T/dynamic_events ;; *) F=$T/kprobe_events ;; esac
  : > $T/kprobe_events
  [ -e $T/dynamic_events ] && : > $T/dynamic_events
  : > $T/error_log
  busybox printf 'KPEMU-DEF> %s\n' "$def"
  if out=$(echo "$def" 2>&1 >> $F); then echo "KPEMU-RC< ok"; else echo "KPEMU-RC< ${out##*: }"; fi
  busybox sed -e 's/^\[[ 0-9.]*\] //' -e 's/^/KPEMU-LOG! /' $T/error_log
  busybox sed 's/^/KPEMU-LIST= /' $F
  if [ $LIST = 1 ] && [ -e $T/events/kprobes/enable ]; then
    echo 1 > $T/events/kprobes/enable
    busybox sleep 0.3
    busybox sed 's/^/KPEMU-KPL@ /' /sys/kernel/debug/kprobes/list
    echo 0 > $T/events/kprobes/enable
  fi
done < /defs.txt
: > $T/kprobe_events
[ -e $T/dynamic_events ] && : > $T/dynamic_events
echo KPEMU-ERRLOG-END
poweroff -f
INIT
extra=()
if [ $kprobes_list = 1 ]; then : > "$work/kprobes-list"; extra=(--add "$work/kprobes-list:/kprobes-list"); fi
initramfs=$(kpemu_cli initramfs --arch "$arch" --init "$work/init" --add "$work/defs.txt:/defs.txt" "${extra[@]}" -o "$work/initramfs.cpio")
log="$work/console.log"
qemu_boot "$initramfs" "nokaslr panic=-1" "$log" KPEMU-ERRLOG-END
grep -q 'KPEMU-ERRLOG-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-ERRLOG-END"; }

out="$here/reference/$arch/$(kernel_series)/$name.error_log"
mkdir -p "$(dirname "$out")"
{
  echo "# Linux's own answers to kprobe_events writes, recorded by guest-images/record-error-log.sh."
  kernel_header
  echo "# definitions: $name.$arch.commands; blocks: '> def', '< ok|errno text', '! error_log line', '= kprobe_events line'$([ $kprobes_list = 1 ] && echo ", '@ kprobes/list line once enabled'")"
  tr -d '\r' < "$log" | sed -n '/^KPEMU-ERRLOG-BEGIN/,/^KPEMU-ERRLOG-END/p' \
    | sed -nE -e 's/^KPEMU-(DEF|RC|LOG|LIST|KPL)([<>!=@]) ?(.*)$/\2 \3/p' -e 's/^\[ *[0-9]+\.[0-9]+\] (trace_[kf]probe: .*)$/~ \1/p'
} > "$out"
echo "recorded $(grep -c '^> ' "$out") definitions for $arch to $out"
