#!/usr/bin/env bash
# Records Linux's OWN /proc/kallsyms for a kernel, as the reference kpemu's symbol decoder is
# compared against. Boots the kernel under QEMU TCG with nokaslr and the default busybox
# initramfs (kpemu initramfs) with an /init that prints /proc/kallsyms (gzip | base64) on the console,
# then powers off.
#
#   guest-images/record-kallsyms.sh [--out FILE] ARCH KERNEL [FULL]
#     ARCH    x86_64 | arm64
#     KERNEL  the kernel file QEMU boots (x86_64: bzImage or vmlinux; arm64: Image)
#     FULL    optional: also keep the complete /proc/kallsyms text there
#     writes  guest-images/reference/ARCH/kallsyms-RELEASE.txt (or --out FILE)
#
# The reference file is small enough to commit: the kernel's release and sha256, the line count
# of /proc/kallsyms, and for the CORE lines (those without a "[module]" column: modules, bpf
# programs, ftrace/kprobe trampolines are not in the image's tables) their count, the sha256 of
# the core lines as "%016x %c %s" sorted bytewise (LC_ALL=C), and every 499th core line in
# kernel order as a readable sample. The excluded lines are listed by their "[...]" tag counts.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prog=record-kallsyms
. "$here/qemu-reference.sh"

out=""
case "${1:-}" in --out) [ $# -ge 2 ] || die "--out needs a file"; out=$2; shift 2 ;; --out=*) out=${1#--out=}; shift ;; esac
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: record-kallsyms.sh [--out FILE] x86_64|arm64 KERNEL [FULL]"
arch=$1; kernel=$(readlink -f "$2"); full=${3:-}
[ -f "$kernel" ] || die "no kernel file $2"
need_qemu "$arch"
release=$(file_release "$kernel")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
echo 0 > /proc/sys/kernel/kptr_restrict
echo 1 > /proc/sys/kernel/printk   # no kernel message (a slow host's RCU stall report) inside the dump
echo KPEMU-KALLSYMS-BEGIN
gzip -c /proc/kallsyms | base64
echo KPEMU-KALLSYMS-END
poweroff -f
EOF
kpemu_cli initramfs --arch "$arch" --init "$work/init" -o "$work/initramfs.cpio" >/dev/null

# the kernel file is the reference machine's kernel (qemu-reference.sh); 1 GiB and arm64's "max" CPU
# (pointer authentication with QEMU's cheap algorithm) for the largest images
kernel_file=$kernel qemu_mem=1024 qemu_cpu=max,pauth-impdef=on qemu_limit=1200 \
  qemu_boot "$work/initramfs.cpio" "nokaslr panic=-1 quiet" "$work/console" KPEMU-KALLSYMS-END
grep -q KPEMU-KALLSYMS-END "$work/console" || { tail -n 20 "$work/console" >&2; die "the boot did not print /proc/kallsyms"; }
sed -n '/KPEMU-KALLSYMS-BEGIN/,/KPEMU-KALLSYMS-END/p' "$work/console" | tr -d '\r' | sed '1d;$d' \
  | base64 -d | gunzip > "$work/kallsyms"
[ -n "$full" ] && cp "$work/kallsyms" "$full"

grep -v ' \[' "$work/kallsyms" > "$work/core" || true
out=${out:-$here/reference/$arch/kallsyms-$release.txt}
mkdir -p "$(dirname "$out")"
{
  echo "# Linux's own /proc/kallsyms, recorded by guest-images/record-kallsyms.sh under QEMU (nokaslr)."
  echo "release $release"
  echo "kernel-sha256 $(sha256sum < "$kernel" | cut -d' ' -f1)"
  echo "qemu $("$qemu" --version | head -n1)"
  echo "lines $(wc -l < "$work/kallsyms")"
  grep -o ' \[[^]]*\]$' "$work/kallsyms" | sort | uniq -c | awk '{print "excluded " $2 " " $1}' || true
  echo "core-lines $(wc -l < "$work/core")"
  echo "core-sorted-sha256 $(LC_ALL=C sort "$work/core" | sha256sum | cut -d' ' -f1)"
  echo "# every 499th core line, in kernel order:"
  awk 'NR % 499 == 1 { print "sample " $0 }' "$work/core"
} > "$out"
echo "recorded $(wc -l < "$work/kallsyms") lines of /proc/kallsyms ($(wc -l < "$work/core") core) for $release to $out"
