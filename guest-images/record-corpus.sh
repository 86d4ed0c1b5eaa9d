#!/usr/bin/env bash
# Records the differential corpus of issue 11: many generated kprobe_events definitions, traced by
# the Linux kernel's OWN kprobe_events under QEMU TCG on the same kernel and the same guest that
# kpemu boots (CorpusTraceTest replays them on kpemu and requires the same trace, event by event).
# One command regenerates and re-records everything for one arch:
#
#   guest-images/record-corpus.sh [--kernel debian[:SUITE]] [--seed N] [--survey] ARCH
#
# 1. survey (when guest-images/reference/ARCH/SERIES/corpus.survey is missing, or --survey): the
#    corpus guest in mode "survey" runs ftrace's function tracer over the workload; each function
#    traced is kept with its number of calls and of those outside the workload's processes
#    (interrupts, softirqs, kernel threads)                      -> reference/ARCH/SERIES/corpus.survey
# 2. generate: kpemu corpus generate (dev.kpemu.cli.CorpusGenerator, deterministic from the seed,
#    rules in its class comment; the kernel's own dialect and BTF)
#                                                                -> reference/ARCH/SERIES/corpus.events
# 3. record: the corpus guest in mode "linux" writes the definitions to tracefs one at a time
#    (the command line is too short for them), enables them, runs the default workload as
#    process 1 and prints tracefs' trace                         -> reference/ARCH/SERIES/corpus.trace
# The guest is dev.kpemu.cli.CorpusGuest (kpemu corpus initramfs); QEMU gets kpemu's RAM (254 MiB
# left to the guest) and kpemu's kernel command line, so /proc/cmdline reads the same.
# A definition Linux refuses, or a boot that does not finish, fails the recording.
# CORPUS_CONSOLE=FILE keeps the recording boot's console there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-corpus
. "$here/qemu-reference.sh"
seed=11; survey=0; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=$2; shift 2 ;;
    --survey) survey=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
reference_args "record-corpus.sh [--kernel debian[:SUITE]] [--seed N] [--survey] x86_64|arm64" "${args[@]}"
[ -z "$name" ] || die "usage: record-corpus.sh [--kernel debian[:SUITE]] [--seed N] [--survey] x86_64|arm64"
series=$(kernel_series)
dir="$here/reference/$arch/$series"
mkdir -p "$dir"
corpus_machine   # qemu-reference.sh: $qemu_mem, $append
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
renice -n 19 $$ >/dev/null 2>&1 || true   # QEMU and kpemu are CPU-heavy: be nice to the machine's other users
kpemu() { kpemu_cli "$@"; }   # the launcher, or $KPEMU_CLI (qemu-reference.sh)

if [ "$survey" = 1 ] || [ ! -f "$dir/corpus.survey" ]; then
  echo "record-corpus: surveying the workload's functions under QEMU ($arch)" >&2
  kpemu corpus initramfs --arch "$arch" --mode survey -o "$work/survey.cpio" >/dev/null
  qemu_boot "$work/survey.cpio" "$append" "$work/survey.log" KPEMU-CORPUS-TRACE-END
  grep -q 'KPEMU-CORPUS-TRACE-END' "$work/survey.log" || { tail -n 20 "$work/survey.log" >&2; die "the survey boot did not finish"; }
  {
    echo "# Functions ftrace's function tracer saw over the corpus workload, recorded by guest-images/record-corpus.sh under QEMU."
    kernel_header
    echo "# function calls calls-outside-the-workload's-task-context"
    tr -d '\r' < "$work/survey.log" | sed -n 's/^KPEMU-SURVEY \([^ ]*\) \([0-9]*\) \([0-9]*\)$/\1 \2 \3/p' | LC_ALL=C sort
  } > "$dir/corpus.survey"
  echo "surveyed $(grep -vc '^#' "$dir/corpus.survey") functions for $arch to $dir/corpus.survey"
fi

[ "${CORPUS_SURVEY_ONLY:-}" = 1 ] && exit 0
events="$dir/corpus.events"
kpemu corpus generate --arch "$arch" --kernel "$kernel" --seed "$seed" --survey "$dir/corpus.survey" -o "$events" >/dev/null
kpemu corpus initramfs --arch "$arch" --mode linux --events "$events" -o "$work/linux.cpio" >/dev/null
qemu_boot "$work/linux.cpio" "$append" "$work/linux.log" KPEMU-CORPUS-TRACE-END
tr -d '\r' < "$work/linux.log" > "$work/console.log"
[ -z "${CORPUS_CONSOLE:-}" ] || cp "$work/console.log" "$CORPUS_CONSOLE"   # the guest's console, for reading
grep -aq 'KPEMU-CORPUS-TRACE-END' "$work/console.log" || { tail -n 20 "$work/console.log" >&2; die "the corpus boot did not finish"; }
if grep -aqE '(BUG:|Oops|WARNING:)' "$work/console.log"; then
  grep -aE -A4 '(BUG:|Oops|WARNING:)' "$work/console.log" | head -n 20 >&2
  die "Linux complained during the corpus boot (its trace stops or lies there): leave that definition's class out in CorpusGenerator"
fi
if grep -aq '^KPEMU-CORPUS-REFUSED' "$work/console.log"; then
  grep -a '^KPEMU-CORPUS-REFUSED' "$work/console.log" | head -n 20 >&2
  die "Linux refused $(grep -ac '^KPEMU-CORPUS-REFUSED' "$work/console.log") definitions (the generator must only write what Linux accepts)"
fi
out="$dir/corpus.trace"
{
  echo "# Reference trace recorded by guest-images/record-corpus.sh from Linux's own kprobe_events (tracefs trace file)."
  kernel_header
  echo "# seed: $seed; guest: dev.kpemu.cli.CorpusGuest mode linux; compared: CorpusGuest.window (the workload)"
  echo "# definitions ($arch/$series/corpus.events):"
  grep -vE '^[[:space:]]*(#|$)' "$events" | sed 's/^/#   /'
  echo "# The trace file's event lines, context columns kept (never compared)."
  sed -n "/^KPEMU-CORPUS-TRACE-BEGIN/,/^KPEMU-CORPUS-TRACE-END/p" "$work/console.log" | grep -avE '^(KPEMU-CORPUS-TRACE|#|\[ *[0-9]+\.[0-9]+\] )' | grep -aE ': \(' || true
} > "$out"
echo "recorded $(grep -vc '^#' "$out") events for $arch to $out"
