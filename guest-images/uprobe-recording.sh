# Sourced by record-uprobes.sh and record-uprobes-prog.sh (after qemu-reference.sh): the part of a
# uprobe recording both share. The guest's /init writes each definition of /defs.txt alone to an
# empty uprobe_events (the error table), registers and enables /events.txt, runs the caller's
# workload, stops tracing and prints the trace file and uprobe_profile to the console; the host
# keeps the error table and the event lines (timestamps removed).

# uprobe_inputs BASE SUBST_FUNCTION: reference/BASE.ARCH.{commands,events} through the caller's
# substitution of its @NAME@ placeholders into $work/defs.txt and $work/events.txt ($work: a
# temporary directory removed at exit).
uprobe_inputs() {
  defs="$here/reference/$1.$arch.commands"
  evs="$here/reference/$1.$arch.events"
  [ -f "$defs" ] || die "no definitions file $defs"
  [ -f "$evs" ] || die "no events file $evs"
  "$2" "$defs" > "$work/defs.txt" || die "$defs has no definitions"
  "$2" "$evs" > "$work/events.txt" || die "$evs has no definitions"
}

# uprobe_init WORKLOAD [AFTER]: writes $work/init; WORKLOAD (shell lines) runs with the events
# enabled, AFTER once tracing is off, before the trace is printed.
uprobe_init() {
  {
    cat <<'INIT'
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
INIT
    printf '%s\n' "$1"
    echo 'echo 0 > $T/tracing_on'
    [ -z "${2:-}" ] || printf '%s\n' "$2"
    cat <<'INIT'
echo KPEMU-TRACE-BEGIN
busybox sed -e '/^#/d' -e 's/^/KPEMU-TRACE| /' $T/trace
busybox sed -e 's/^/KPEMU-PROFILE% /' $T/uprobe_profile
echo KPEMU-TRACE-END
poweroff -f
INIT
  } > "$work/init"
}

# uprobe_boot [kpemu initramfs --add ARG...]: the guest under QEMU; $log: its console.
uprobe_boot() {
  local initramfs
  initramfs=$(kpemu_cli initramfs --arch "$arch" --init "$work/init" "$@" --add "$work/defs.txt:/defs.txt" \
      --add "$work/events.txt:/events.txt" -o "$work/initramfs.cpio")
  log="$work/console.log"
  qemu_boot "$initramfs" "nokaslr panic=-1" "$log" KPEMU-TRACE-END
  grep -q 'KPEMU-TRACE-END' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-TRACE-END"; }
  if grep -q 'KPEMU-EVENT-REFUSED' "$log"; then grep 'KPEMU-EVENT-REFUSED' "$log" >&2; die "the kernel refused a definition of $evs"; fi
}

# The error table's blocks from $log (record-error-log.sh's block format, '=' lines list uprobe_events).
uprobe_error_blocks() {
  tr -d '\r' < "$log" | sed -n '/^KPEMU-ERRLOG-BEGIN/,/^KPEMU-ERRLOG-END/p' \
    | sed -nE -e 's/^KPEMU-(DEF|RC|LOG|LIST)([<>!=]) ?(.*)$/\2 \3/p' -e 's/^\[ *[0-9]+\.[0-9]+\] (trace_uprobe: .*)$/~ \1/p'
}

# The trace's event lines from $log, timestamps removed, then '% ' lines: uprobe_profile.
uprobe_trace_lines() {
  tr -d '\r' < "$log" | sed -n '/^KPEMU-TRACE-BEGIN/,/^KPEMU-TRACE-END/p' \
    | LC_ALL=C sed -nE -e 's/^KPEMU-TRACE\| ( *[^ ].*-[0-9]+ +\[[0-9]+\] [^ ]+) +[0-9]+\.[0-9]{6}: (.*)$/\1 \2/p' -e 's/^KPEMU-PROFILE% (.*)$/% \1/p'
}
