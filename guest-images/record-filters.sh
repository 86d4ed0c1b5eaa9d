#!/usr/bin/env bash
# Records Linux's OWN event filters and hist triggers (issue 15) for a probe script, as the
# reference kpemu's --filter/--trigger output is compared against. The corpus guest
# (dev.kpemu.cli.CorpusGuest, mode linux) boots under QEMU TCG on the same kernel, writes the
# definitions to tracefs' kprobe_events, enables them, then appends each setup line
# (filters, triggers, enables; a refused write prints the file's error text), runs the default
# workload as process 1, and prints tracefs' trace and every event's hist file.
#
#   guest-images/record-filters.sh [--kernel debian[:SUITE]] ARCH NAME
#     reads  guest-images/reference/NAME.ARCH.events   (definitions, one per line)
#            or guest-images/reference/ARCH/SERIES/NAME.events  when the kernel series needs its own
#            (6.12 and later: bprm_execve names the file only through bprm->filename)
#            guest-images/reference/NAME.ARCH.setup    (tracefs FILE<TAB>TEXT lines)
#     writes guest-images/reference/ARCH/SERIES/NAME.trace          (the trace file's event lines)
#            guest-images/reference/ARCH/SERIES/NAME.hist           (each hist file, between "## hist FILE" lines)
#            guest-images/reference/ARCH/SERIES/NAME.filter-errors  (each refused write: "## refused FILE<TAB>TEXT", the file's
#                                                                    text, "## error_log" and what the write logged)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-filters
. "$here/qemu-reference.sh"
reference_args "record-filters.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME" "$@"
[ -n "$name" ] || die "usage: record-filters.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME"
series=$(kernel_series)
defs="$here/reference/$arch/$series/$name.events"     # a kernel series' own script, when it needs one
[ -f "$defs" ] || defs="$here/reference/$name.$arch.events"
setup="$here/reference/$name.$arch.setup"
[ -f "$defs" ] && [ -f "$setup" ] || die "need $defs and $setup"
dir="$here/reference/$arch/$series"
mkdir -p "$dir"
qemu_mem=254
if [ "$arch" = x86_64 ]; then append="nokaslr"; else append="earlycon=pl011,0x9000000 nokaslr"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
renice -n 19 $$ >/dev/null 2>&1 || true
# two boots: the trace and hist files from one whose set-up runs no program (the workload's pids
# as under kpemu), the refused files' text from one that reads them with busybox cat
boot() {   # NAME [corpus initramfs options]
  local n=$1; shift
  kpemu_cli corpus initramfs --arch "$arch" --mode linux --events "$defs" --setup "$setup" "$@" -o "$work/$n.cpio" >/dev/null
  qemu_boot "$work/$n.cpio" "$append" "$work/$n.raw" KPEMU-CORPUS-TRACE-END
  tr -d '\r' < "$work/$n.raw" > "$work/$n.log"
  grep -q 'KPEMU-CORPUS-TRACE-END' "$work/$n.log" || { tail -n 20 "$work/$n.log" >&2; die "the $n boot did not finish"; }
  if grep -q '^KPEMU-CORPUS-REFUSED' "$work/$n.log"; then
    grep '^KPEMU-CORPUS-REFUSED' "$work/$n.log" >&2; die "Linux refused a definition"
  fi
}
boot linux
boot errors --read-refused
header() {
  echo "# $1 recorded by guest-images/record-filters.sh from Linux's own tracefs."
  kernel_header
  echo "# guest: dev.kpemu.cli.CorpusGuest mode linux; setup: $name.$arch.setup"
  echo "# definitions (${defs#"$here/reference/"}):"
  grep -vE '^[[:space:]]*(#|$)' "$defs" | sed 's/^/#   /'
}
{
  header "Reference trace"
  echo "# The trace file's event lines, context columns kept (compared: the workload's window, CorpusGuest.window)."
  sed -n "/^KPEMU-CORPUS-TRACE-BEGIN/,/^KPEMU-CORPUS-TRACE-END/p" "$work/linux.log" | grep -vE '^(KPEMU-CORPUS-TRACE|#|\[ *[0-9]+\.[0-9]+\] )' | grep -E ': \(' || true
} > "$dir/$name.trace"
{
  header "hist files"
  sed -n '/^KPEMU-HIST-BEGIN /,/^KPEMU-HIST-END$/p' "$work/linux.log" | { grep -vE '^\[ *[0-9]+\.[0-9]+\] ' || true; } \
    | sed -e 's/^KPEMU-HIST-BEGIN \(.*\)$/## hist \1/' -e '/^KPEMU-HIST-END$/d'
} > "$dir/$name.hist"
{
  header "Refused tracefs writes"
  # each refused write: "## refused FILE<TAB>TEXT", the file's text, then "## error_log" and the entries
  # the write logged, timestamps removed
  sed -n '/^KPEMU-SETUP-REFUSED /,/^KPEMU-SETUP-REFUSED-END$/p' "$work/errors.log" | { grep -vE '^\[ *[0-9]+\.[0-9]+\] ' || true; } \
    | awk '/^KPEMU-SETUP-REFUSED / { sub(/^KPEMU-SETUP-REFUSED /, ""); print "## refused " $0; elog = 0; next }
           /^KPEMU-SETUP-REFUSED-END$/ { next }
           /^KPEMU-ERROR-LOG / { if (!elog) { print "## error_log"; elog = 1 }
                                 sub(/^KPEMU-ERROR-LOG /, ""); sub(/^\[ *[0-9]+\.[0-9]+\] /, ""); print; next }
           { print }'
} > "$dir/$name.filter-errors"
echo "recorded $(grep -vc '^#' "$dir/$name.trace") events, $(grep -c '^## hist' "$dir/$name.hist") hist files, $(grep -c '^## refused' "$dir/$name.filter-errors") refused writes for $arch to $dir"
