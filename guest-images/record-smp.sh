#!/usr/bin/env bash
# Records Linux's OWN kprobes on several CPUs (issue 26): the "smp" probe script under QEMU TCG with
# -smp CPUS, on the same kernel and initramfs builder kpemu uses. The guest (reference/smp.init)
# pins one task to each CPU, each reading /proc/version ROUNDS times at once; the definitions are
# given on the kernel command line (kprobe_event=, enabled with trace_event=), as kpemu's are
# registered, and the guest prints tracefs' trace file and kprobe_profile at the end.
#
#   guest-images/record-smp.sh [--kernel debian[:SUITE]] ARCH CPUS
#     reads  guest-images/reference/smp.ARCH.events  (or reference/ARCH/SERIES/smp.events)
#     writes guest-images/reference/ARCH/SERIES/smp-cpusCPUS.trace    (the trace file's event lines,
#                                                                   timestamps removed, columns kept)
#            guest-images/reference/ARCH/SERIES/smp-cpusCPUS.profile  (kprobe_profile)
#   ROUNDS: $SMP_ROUNDS, default 50 (the kernel command line's smp_rounds=, which kpemu's test passes too).
#
# What a comparison may use: per CPU, the sequence of events and their probe text; per task, the
# same; kprobe_profile's hits and misses. Not the interleaving across CPUs, pids (kernel threads
# started on other CPUs take pids at times the host's speed decides) or timestamps.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-smp
. "$here/qemu-reference.sh"
reference_args "record-smp.sh [--kernel debian[:SUITE]] x86_64|arm64 CPUS" "$@"
cpus=$name
case "$cpus" in [1-8]) ;; *) die "CPUS must be 1 to 8, not '$cpus'" ;; esac
rounds=${SMP_ROUNDS:-50}
series=$(kernel_series)
defs="$here/reference/$arch/$series/smp.events"
[ -f "$defs" ] || defs="$here/reference/smp.$arch.events"
[ -f "$defs" ] || die "no probe script $defs"
dir="$here/reference/$arch/$series"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kpemu_cli initramfs --arch "$arch" --kernel "$kernel" --init "$here/reference/smp.init" -o "$work/smp.cpio" >/dev/null

boot_probe_args "$defs"
append="nokaslr panic=-1 kprobe_event=$kp trace_event=$te smp_trace=1 smp_rounds=$rounds"
qemu_cpus=$cpus
qemu_boot "$work/smp.cpio" "$append" "$work/linux.log" KPEMU-INIT-DONE
grep -q "^KPEMU-SMP-WORK-DONE" "$work/linux.log" || { tail -n 30 "$work/linux.log" >&2; die "the guest did not finish its work"; }
grep -q "cpus=$cpus " "$work/linux.log" || { grep KPEMU-INIT-START "$work/linux.log" >&2; die "Linux did not bring up $cpus CPUs"; }

header() {
  echo "# $1 recorded by guest-images/record-smp.sh from Linux's own tracefs."
  kernel_header
  echo "# qemu -smp $cpus (single-threaded TCG); guest: reference/smp.init, smp_rounds=$rounds"
  echo "# definitions (${defs#"$here/reference/"}):"
  grep -vE '^[[:space:]]*(#|$)' "$defs" | sed 's/^/#   /'
}
{
  header "Reference trace"
  echo "# The trace file's event lines, timestamps removed (TASK-PID [CPU] FLAGS EVENT: TEXT)."
  sed -n "/^KPEMU-SMP-TRACE-BEGIN/,/^KPEMU-SMP-TRACE-END/p" "$work/linux.log" | tr -d '\r' \
    | grep -vE '^(KPEMU-SMP-TRACE|#|\[ *[0-9]+\.[0-9]+\] )' | grep -E ': \(' \
    | sed -E 's/^(.*\[[0-9]{3}\] [^ ]+) +[0-9]+\.[0-9]+: /\1 /' || true
} > "$dir/smp-cpus$cpus.trace"
{
  header "kprobe_profile"
  sed -n "/^KPEMU-SMP-PROFILE-BEGIN/,/^KPEMU-SMP-PROFILE-END/p" "$work/linux.log" | tr -d '\r' \
    | grep -vE '^(KPEMU-SMP-PROFILE|\[ *[0-9]+\.[0-9]+\] )' || true
} > "$dir/smp-cpus$cpus.profile"
echo "recorded $(grep -vc '^#' "$dir/smp-cpus$cpus.trace") events on $cpus CPUs for $arch to $dir"
