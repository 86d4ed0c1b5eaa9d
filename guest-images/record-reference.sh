#!/usr/bin/env bash
# Records the Linux kernel's OWN kprobe_events output for a probe script, as the reference kpemu's
# traces are compared against. Boots the same Debian kernel and default initramfs that kpemu
# boots, under QEMU TCG, with the definitions passed on the kernel command line
# (kprobe_event=... trace_event=... tp_printk), and keeps the event lines the console prints.
#
#   guest-images/record-reference.sh [--kernel debian[:SUITE]] ARCH NAME
#     reads  guest-images/reference/NAME.ARCH.events            (one kprobe_events definition per line)
#     writes guest-images/reference/ARCH/SERIES/NAME.trace      (header + event lines, timestamps removed)
#   SERIES is the kernel's major.minor (6.1, 6.12, 7.2): kpemu's tests compare a boot with the
#   reference of the series that booted. --kernel: as kpemu's (default: the machine's suite).
#
# Needs qemu-system-x86 / qemu-system-arm (installed with apt-get when missing and run as root).
# Developers run it when Debian publishes a new kernel; CI only reads the recorded traces.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
die() { echo "record-reference: $*" >&2; exit 1; }
usage() { echo "record-reference: usage: record-reference.sh [--kernel debian[:SUITE]] x86_64|arm64 NAME" >&2; exit 2; }

kernel=debian
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) [ $# -ge 2 ] || usage; kernel=$2; shift 2 ;;
    --kernel=*) kernel=${1#--kernel=}; shift ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || usage
case "$kernel" in debian|debian:*) ;; *) die "--kernel takes debian or debian:SUITE (a reference belongs to a Debian build)" ;; esac
arch=$1; name=$2
defs="$here/reference/$name.$arch.events"
[ -f "$defs" ] || die "no probe script $defs"
case "$arch" in
  x86_64) qemu=qemu-system-x86_64; pkg=qemu-system-x86 ;;
  arm64)  qemu=qemu-system-aarch64; pkg=qemu-system-arm ;;
  *) die "unknown architecture '$arch' (x86_64 or arm64)" ;;
esac
if ! command -v "$qemu" >/dev/null; then
  [ "$(id -u)" = 0 ] || die "$qemu is missing; install Debian's $pkg"
  apt-get install -y "$pkg" >/dev/null 2>&1 || die "apt-get install $pkg failed"
fi

img() { "$root/kpemu" images --kernel "$kernel" --arch "$arch" --print "$1"; }
initramfs=$(img initramfs)
release=$(img release)
version="package=$(img package) version=$(img version) "
series=$(echo "$release" | grep -oE '^[0-9]+\.[0-9]+') || die "cannot tell the kernel series of release '$release'"

# kprobe_event= wants ',' instead of spaces inside a definition and ';' between definitions.
events=()
kp=""
while IFS= read -r line || [ -n "$line" ]; do
  line=${line%%#*}; line=$(echo "$line" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')
  [ -n "$line" ] || continue
  head=${line%% *}
  ev=${head#*:}; case "$ev" in */*) ;; *) ev="kprobes/$ev" ;; esac
  events+=("${ev/\//:}")
  kp+="${kp:+;}$(echo "$line" | tr -s ' ' ',')"
done < "$defs"
[ ${#events[@]} -gt 0 ] || die "$defs has no definitions"
te=$(IFS=,; echo "${events[*]}")
append="nokaslr panic=-1 kprobe_event=$kp trace_event=$te tp_printk"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ "$arch" = x86_64 ]; then
  image=$(img vmlinux)
  cmd=("$qemu" -M pc -m 512 -nographic -no-reboot -kernel "$image" -initrd "$initramfs" -append "console=ttyS0 $append")
else
  image=$(img kernel)
  cmd=("$qemu" -M virt -cpu cortex-a57 -m 512 -nographic -no-reboot -kernel "$image" -initrd "$initramfs" -append "console=ttyAMA0 $append")
fi
timeout 300 "${cmd[@]}" >"$log" 2>&1 || true
grep -q 'KPEMU-INIT-DONE' "$log" || { tail -n 20 "$log" >&2; die "the reference boot did not reach KPEMU-INIT-DONE"; }

out="$here/reference/$arch/$series/$name.trace"
mkdir -p "$(dirname "$out")"
{
  echo "# Reference trace recorded by guest-images/record-reference.sh from Linux's own kprobe_events."
  echo "# kernel: $release ($version)"
  echo "# suite: $(img suite)"
  echo "# qemu: $("$qemu" --version | head -n1)"
  echo "# definitions ($name.$arch.events):"
  grep -vE '^[[:space:]]*(#|$)' "$defs" | sed 's/^/#   /'
  echo "# One line per event, in order, as the console printed it without the timestamp."
  # event lines look like "[    2.049993] myopen: (do_sys_openat2+0x0/0x170) dfd=... fn=..."
  ev_re=$(printf '%s\n' "${events[@]}" | sed 's/.*://' | paste -sd'|')
  sed -nE "s/^\[ *[0-9]+\.[0-9]+\] (($ev_re): \(.*)$/\1/p" "$log" | tr -d '\r'
} > "$out"
echo "recorded $(grep -vc '^#' "$out") events for $arch to $out"
