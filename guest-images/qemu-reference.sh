# Sourced by guest-images/record-*.sh: boots the kernel kpemu boots under QEMU TCG, the reference
# machine, with an initramfs, and keeps the console. Changes nothing outside the given files.
#
# Provides: die; reference_args USAGE "$@" (parses "[--kernel debian[:SUITE]] ARCH [NAME]" into
#           $kernel, $arch, $name; sets $qemu through need_qemu); need_qemu ARCH (sets $qemu,
#           installing Debian's QEMU when missing, as root);
#           kernel_print WHAT (kpemu images --print for the chosen kernel); kernel_series;
#           kernel_header (the "# kernel:", "# suite:" and "# qemu:" header lines);
#           qemu_boot INITRAMFS APPEND LOG (the kernel's console= is added; RAM: $qemu_mem MiB, default 512).

die() { echo "${prog:-record}: $*" >&2; exit 1; }

reference_args() {
  local usage=$1; shift
  kernel=debian; arch=""; name=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --kernel) [ $# -ge 2 ] || { echo "$prog: usage: $usage" >&2; exit 2; }; kernel=$2; shift 2 ;;
      --kernel=*) kernel=${1#--kernel=}; shift ;;
      -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
      -*) echo "$prog: usage: $usage" >&2; exit 2 ;;
      *) if [ -z "$arch" ]; then arch=$1; elif [ -z "$name" ]; then name=$1; else echo "$prog: usage: $usage" >&2; exit 2; fi; shift ;;
    esac
  done
  [ -n "$arch" ] || { echo "$prog: usage: $usage" >&2; exit 2; }
  case "$kernel" in debian|debian:*) ;; *) die "--kernel takes debian or debian:SUITE (a reference belongs to a Debian build)" ;; esac
  need_qemu "$arch"
}

# need_qemu ARCH: sets $qemu, installing Debian's QEMU when missing (as root).
need_qemu() {
  local pkg
  case "$1" in
    x86_64) qemu=qemu-system-x86_64; pkg=qemu-system-x86 ;;
    arm64)  qemu=qemu-system-aarch64; pkg=qemu-system-arm ;;
    *) die "unknown architecture '$1' (x86_64 or arm64)" ;;
  esac
  if ! command -v "$qemu" >/dev/null; then
    [ "$(id -u)" = 0 ] || die "$qemu is missing; install Debian's $pkg"
    apt-get install -y "$pkg" >/dev/null 2>&1 || die "apt-get install $pkg failed"
  fi
}

kernel_print() { "$root/kpemu" images --kernel "$kernel" --arch "$arch" --print "$1"; }

# The kernel's series (major.minor of its release): references are kept per series.
kernel_series() {
  kernel_print release | grep -oE '^[0-9]+\.[0-9]+' || die "cannot tell the kernel series of release '$(kernel_print release)'"
}

kernel_header() {
  echo "# kernel: $(kernel_print release) (package=$(kernel_print package) version=$(kernel_print version) )"
  echo "# suite: $(kernel_print suite)"
  echo "# qemu: $("$qemu" --version | head -n1)"
}

qemu_boot() {
  local initramfs=$1 append=$2 log=$3 cmd
  if [ "$arch" = x86_64 ]; then
    cmd=("$qemu" -M pc -m "${qemu_mem:-512}" -nographic -no-reboot -kernel "$(kernel_print vmlinux)" -initrd "$initramfs" -append "console=ttyS0 $append")
  else
    cmd=("$qemu" -M virt -cpu cortex-a57 -m "${qemu_mem:-512}" -nographic -no-reboot -kernel "$(kernel_print kernel)" -initrd "$initramfs" -append "console=ttyAMA0 $append")
  fi
  timeout 600 "${cmd[@]}" >"$log" 2>&1 || true
}
