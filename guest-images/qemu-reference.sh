# Sourced by guest-images/record-*.sh: boots the kernel kpemu boots under QEMU TCG, the reference
# machine, with an initramfs, and keeps the console. Changes nothing outside the given files.
#
# Provides: die, need_qemu ARCH, kernel_header ARCH (the "# kernel:" and "# qemu:" header lines),
#           qemu_boot ARCH INITRAMFS APPEND LOG (the kernel's console= is added).

die() { echo "${prog:-record}: $*" >&2; exit 1; }

# Sets $qemu for ARCH, installing Debian's QEMU when missing (as root).
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

kernel_header() {
  local arch=$1 release version
  release=$("$root/kpemu" images --arch "$arch" --print release)
  version=$(grep -E '^(package|version)=' "$(dirname "$("$root/kpemu" images --arch "$arch" --print kernel)")/version" | tr '\n' ' ')
  echo "# kernel: $release ($version)"
  echo "# qemu: $("$qemu" --version | head -n1)"
}

qemu_boot() {
  local arch=$1 initramfs=$2 append=$3 log=$4 kernel cmd
  if [ "$arch" = x86_64 ]; then
    kernel=$("$root/kpemu" images --arch x86_64 --print vmlinux)
    cmd=("$qemu" -M pc -m 512 -nographic -no-reboot -kernel "$kernel" -initrd "$initramfs" -append "console=ttyS0 $append")
  else
    kernel=$("$root/kpemu" images --arch arm64 --print kernel)
    cmd=("$qemu" -M virt -cpu cortex-a57 -m 512 -nographic -no-reboot -kernel "$kernel" -initrd "$initramfs" -append "console=ttyAMA0 $append")
  fi
  timeout 600 "${cmd[@]}" >"$log" 2>&1 || true
}
