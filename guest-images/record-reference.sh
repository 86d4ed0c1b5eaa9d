#!/usr/bin/env bash
# Records the Linux kernel's OWN kprobe_events output for a probe script, as the reference kpemu's
# traces are compared against. Boots the same Debian kernel and default initramfs that kpemu
# boots, under QEMU TCG, with the definitions passed on the kernel command line
# (kprobe_event=... trace_event=... tp_printk), and keeps the event lines the console prints.
#
#   guest-images/record-reference.sh [--kernel debian[:SUITE]|FILE] [--out FILE] ARCH NAME
#     reads  guest-images/reference/NAME.ARCH.events            (one kprobe_events definition per line)
#            or guest-images/reference/ARCH/SERIES/NAME.events  when the kernel series needs its own
#            (a probe point at an offset that moved between builds)
#            guest-images/reference/NAME.init, NAME.modules     (optional: the script's own /init, and
#                                                                the kernel's modules it loads first)
#     writes guest-images/reference/ARCH/SERIES/NAME.trace      (header + event lines, timestamps removed)
#            or the --out FILE (a kernel file's reference, e.g. one build-kernel.sh built, belongs
#            to that build: the source-kernel tests record it at test time, outside the repository)
#   SERIES is the kernel's major.minor (6.1, 6.12, 7.2): kpemu's tests compare a boot with the
#   reference of the series that booted. --kernel: as kpemu's (default: the machine's suite).
#
# Needs qemu-system-x86 / qemu-system-arm (installed with apt-get when missing and run as root).
# Developers run it when Debian publishes a new kernel; CI only reads the recorded traces.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-reference
. "$here/qemu-reference.sh"
reference_args "record-reference.sh [--kernel debian[:SUITE]|FILE] [--out FILE] x86_64|arm64 NAME" "$@"
[ -n "$name" ] || die "usage: record-reference.sh [--kernel debian[:SUITE]|FILE] [--out FILE] x86_64|arm64 NAME"
initramfs=$(kernel_print initramfs)
# A script with its own guest: reference/NAME.init as /init, with the booted kernel's modules
# named in reference/NAME.modules loaded first (kpemu initramfs --modules; kpemu's test builds
# the same archive).
if [ -f "$here/reference/$name.init" ]; then
  initramfs=$(mktemp --suffix=.cpio)
  mods=()
  [ -f "$here/reference/$name.modules" ] && mods=(--modules "$(tr -d ' \n' < "$here/reference/$name.modules")")
  kpemu_cli initramfs --arch "$arch" --kernel "$kernel" --init "$here/reference/$name.init" "${mods[@]}" -o "$initramfs" >/dev/null
fi
series=$(kernel_series)
defs="$here/reference/$arch/$series/$name.events"
[ -f "$defs" ] || defs="$here/reference/$name.$arch.events"
[ -f "$defs" ] || die "no probe script $defs"

boot_probe_args "$defs"
append="nokaslr panic=-1 kprobe_event=$kp trace_event=$te tp_printk"

log=$(mktemp)
trap 'rm -f "$log"; case "$initramfs" in /tmp/*) rm -f "$initramfs" ;; esac' EXIT
qemu_boot "$initramfs" "$append" "$log" KPEMU-INIT-DONE
grep -q 'KPEMU-INIT-DONE' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-INIT-DONE"; }

out=${out:-$here/reference/$arch/$series/$name.trace}
mkdir -p "$(dirname "$out")"
{
  echo "# Reference trace recorded by guest-images/record-reference.sh from Linux's own kprobe_events."
  kernel_header
  echo "# definitions (${defs#"$here/reference/"}):"
  grep -vE '^[[:space:]]*(#|$)' "$defs" | sed 's/^/#   /'
  echo "# One line per event, in order, as the console printed it without the timestamp."
  # event lines look like "[    2.049993] myopen: (do_sys_openat2+0x0/0x170) dfd=... fn=..."
  ev_re=$(printf '%s\n' "${events[@]}" | sed 's/.*://' | paste -sd'|')
  # bytes, not characters: a probe may print bytes that are not UTF-8 (issue 32), which a UTF-8
  # locale's sed would not match with '.'
  LC_ALL=C sed -nE "s/^\[ *[0-9]+\.[0-9]+\] (($ev_re): \(.*)$/\1/p" "$log" | tr -d '\r'
} > "$out"
echo "recorded $(grep -vc '^#' "$out") events for $arch to $out"
