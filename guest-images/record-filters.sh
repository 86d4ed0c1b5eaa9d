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
#            guest-images/reference/NAME.ARCH.setup    (tracefs FILE<TAB>TEXT lines)
#     writes guest-images/reference/ARCH/SERIES/NAME.trace          (the trace file's event lines)
#            guest-images/reference/ARCH/SERIES/NAME.hist           (each hist file, between "## hist FILE" lines)
#            guest-images/reference/ARCH/SERIES/NAME.filter-errors  (each refused write: "## refused FILE", the file's text)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-filters
. "$here/qemu-reference.sh"
reference_args "record-filters.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME" "$@"
[ -n "$name" ] || die "usage: record-filters.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME"
defs="$here/reference/$name.$arch.events"
setup="$here/reference/$name.$arch.setup"
[ -f "$defs" ] && [ -f "$setup" ] || die "need $defs and $setup"
series=$(kernel_series)
dir="$here/reference/$arch/$series"
mkdir -p "$dir"
qemu_mem=254
if [ "$arch" = x86_64 ]; then append="nokaslr"; else append="earlycon=pl011,0x9000000 nokaslr"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
renice -n 19 $$ >/dev/null 2>&1 || true
kpemu_cli corpus initramfs --arch "$arch" --mode linux --events "$defs" --setup "$setup" -o "$work/linux.cpio" >/dev/null
qemu_boot "$work/linux.cpio" "$append" "$work/linux.log"
tr -d '\r' < "$work/linux.log" > "$work/console.log"
grep -q 'KPEMU-CORPUS-TRACE-END' "$work/console.log" || { tail -n 20 "$work/console.log" >&2; die "the boot did not finish"; }
if grep -q '^KPEMU-CORPUS-REFUSED' "$work/console.log"; then
  grep '^KPEMU-CORPUS-REFUSED' "$work/console.log" >&2; die "Linux refused a definition"
fi
header() {
  echo "# $1 recorded by guest-images/record-filters.sh from Linux's own tracefs."
  kernel_header
  echo "# guest: dev.kpemu.cli.CorpusGuest mode linux; setup: $name.$arch.setup"
  echo "# definitions ($name.$arch.events):"
  grep -vE '^[[:space:]]*(#|$)' "$defs" | sed 's/^/#   /'
}
{
  header "Reference trace"
  echo "# The trace file's event lines, context columns kept (compared: the workload's window, CorpusGuest.window)."
  sed -n "/^KPEMU-CORPUS-TRACE-BEGIN/,/^KPEMU-CORPUS-TRACE-END/p" "$work/console.log" | grep -vE '^(KPEMU-CORPUS-TRACE|#|\[ *[0-9]+\.[0-9]+\] )' | grep -E ': \(' || true
} > "$dir/$name.trace"
{
  header "hist files"
  sed -n '/^KPEMU-HIST-BEGIN /,/^KPEMU-HIST-END$/p' "$work/console.log" | grep -vE '^\[ *[0-9]+\.[0-9]+\] ' \
    | sed -e 's/^KPEMU-HIST-BEGIN \(.*\)$/## hist \1/' -e '/^KPEMU-HIST-END$/d'
} > "$dir/$name.hist"
{
  header "Refused tracefs writes"
  sed -n '/^KPEMU-SETUP-REFUSED /,/^KPEMU-SETUP-REFUSED-END$/p' "$work/console.log" | grep -vE '^\[ *[0-9]+\.[0-9]+\] ' \
    | sed -e 's/^KPEMU-SETUP-REFUSED \(.*\)$/## refused \1/' -e '/^KPEMU-SETUP-REFUSED-END$/d'
} > "$dir/$name.filter-errors"
echo "recorded $(grep -vc '^#' "$dir/$name.trace") events, $(grep -c '^## hist' "$dir/$name.hist") hist files, $(grep -c '^## refused' "$dir/$name.filter-errors") refused writes for $arch to $dir"
