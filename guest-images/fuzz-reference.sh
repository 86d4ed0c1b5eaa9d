#!/usr/bin/env bash
# The Linux side of `kpemu fuzz` (dev.kpemu.cli.FuzzCommand): boots one corpus guest (kpemu corpus
# initramfs --mode linux: Linux's own kprobe_events, written to tracefs one definition at a time)
# under QEMU TCG on a kernel file, with the corpus machine of record-corpus.sh (corpus_machine in
# qemu-reference.sh: RAM and command line), and keeps the console. The QEMU invocation is
# qemu-reference.sh's, the one every recording uses.
#
#   guest-images/fuzz-reference.sh KERNEL-FILE x86_64|arm64 INITRAMFS CONSOLE-LOG
#     KERNEL-FILE: the vmlinux (x86_64) or Image (arm64) kpemu boots
#   prints the QEMU command line it ran (one line, shell-quoted) on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=fuzz-reference
. "$here/qemu-reference.sh"
[ $# -eq 4 ] || die "usage: fuzz-reference.sh KERNEL-FILE x86_64|arm64 INITRAMFS CONSOLE-LOG"
reference_args "fuzz-reference.sh KERNEL-FILE x86_64|arm64 INITRAMFS CONSOLE-LOG" --kernel "$1" "$2"
initramfs=$3; log=$4
[ -f "$initramfs" ] || die "no initramfs $initramfs"
corpus_machine
qemu_limit=${qemu_limit:-300}
qemu_command "$initramfs" "$append"
printf '%q ' "${cmd[@]}"; echo
qemu_boot "$initramfs" "$append" "$log" KPEMU-CORPUS-TRACE-END
