#!/usr/bin/env bash
# Builds a small bootable Linux kernel from source, as kernel developers do: Debian's
# linux-source-* package (default: the newest one of the machine's Debian suite, fetched with
# private apt directories like fetch-kernel.sh) or a given source tarball or tree. The config
# starts from `make tinyconfig` and enables what kpemu's machines and probes need (console,
# initrd, kallsyms, kprobes, ftrace, BTF, power-off, fail_function fault injection). Cross-compiles arm64 with Debian's
# gcc-aarch64-linux-gnu. Installs missing build tools with apt-get (as root). Reproducible
# (fixed KBUILD_BUILD_TIMESTAMP/USER/HOST). Runs at the caller's priority with one job per core
# (`nice build-kernel.sh ARCH` to be kind to the machine: CI must not be, since under `nice -n 19`
# a busy host starved its build for tens of minutes). Prints the image
# path (x86_64: bzImage; arm64: Image) on stdout; progress goes to stderr.
#
#   guest-images/build-kernel.sh [--refresh] [--source TARBALL|TREE] x86_64|arm64
#     --source   a kernel source tarball (.tar, .tar.gz, .tar.xz, .tar.zst ...) or an unpacked tree
#                (default: Debian's newest linux-source-* of the machine's suite)
#     --refresh  re-resolve Debian's linux-source package (default: the one fetched before)
#   cache: ${KPEMU_CACHE:-<repo>/.cache}/kernels-src/
#            <arch>-<version>-<confighash>/{bzImage|Image,vmlinux,config,build-info}   the result (reused;
#              build-info: arch, version, release, source, tree (the unpacked source), compiler, ...)
#            debian/<suite>/{linux-source-*.tar.*,package}                             the fetched source
#            src/<id>/                                                                  unpacked sources
#          <confighash> covers the config requests below, the source's identity and the compiler.
#   exit: 0 built (or cached), 1 error (network, source, build), 2 usage (arch, option, missing source),
#         3 the build tools are missing and cannot be installed (not root, no apt-get, apt-get failed)
set -euo pipefail
{ # read whole before it runs (a build takes minutes; an edit of this file must not change a running one)
prog=build-kernel
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"

log() { echo "$prog: $*" >&2; }
tools_error() { echo "$prog: $*" >&2; exit 3; }

# The config kpemu's machines and probes need, on top of tinyconfig: "option value" per line
# (y, n, or a string/number). Kept in the hash: change a line and a new kernel is built.
common_config='
64BIT y
PRINTK y
EARLY_PRINTK y
TTY y
BUG y
BLK_DEV_INITRD y
RD_GZIP y
DEVTMPFS y
DEVTMPFS_MOUNT y
PROC_FS y
SYSFS y
TMPFS y
SHMEM y
BINFMT_ELF y
BINFMT_SCRIPT y
MULTIUSER y
FUTEX y
EPOLL y
SIGNALFD y
TIMERFD y
EVENTFD y
POSIX_TIMERS y
FILE_LOCKING y
PRINTK_TIME y
KALLSYMS y
KALLSYMS_ALL y
KPROBES y
KRETPROBES y
FTRACE y
FUNCTION_TRACER y
DYNAMIC_FTRACE y
KPROBE_EVENTS y
DEBUG_FS y
DEBUG_KERNEL y
DEBUG_INFO_NONE n
DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT n
DEBUG_INFO_DWARF5 y
DEBUG_INFO_BTF y
DEBUG_INFO_REDUCED n
DEBUG_INFO_SPLIT n
BPF y
BPF_SYSCALL y
RELOCATABLE y
RANDOMIZE_BASE n
MODULES y
MODULE_SIG n
FUNCTION_ERROR_INJECTION y
FAULT_INJECTION y
FAULT_INJECTION_DEBUG_FS y
FAIL_FUNCTION y
'
x86_config='
SMP n
SERIAL_8250 y
SERIAL_8250_CONSOLE y
SERIAL_8250_NR_UARTS 4
SERIAL_8250_RUNTIME_UARTS 4
ACPI y
PCI y
RTC_CLASS n
KERNEL_GZIP y
KERNEL_XZ n
X86_VERBOSE_BOOTUP y
'
arm64_config='
SMP y
ARM64_VA_BITS_48 y
ARM64_VA_BITS_52 n
SERIAL_AMBA_PL011 y
SERIAL_AMBA_PL011_CONSOLE y
ARM_AMBA y
ARM_GIC y
ARM_ARCH_TIMER y
ARM_PSCI_FW y
OF y
'

usage="usage: build-kernel.sh [--refresh] [--source TARBALL|TREE] x86_64|arm64"
arch=""; source_arg=""; refresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    --source) [ $# -ge 2 ] || usage_error "--source needs a tarball or a tree"; source_arg=$2; shift ;;
    --source=*) source_arg=${1#--source=} ;;
    --refresh) refresh=1 ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
    -*) usage_error "unknown option '$1'; $usage" ;;
    *) [ -z "$arch" ] || usage_error "only one architecture may be given; $usage"; arch=$1 ;;
  esac
  shift
done
[ -n "$arch" ] || usage_error "$usage"
case "$arch" in
  x86_64|amd64) arch=x86_64; karch=x86; kmake_arch=x86_64; image_rel=arch/x86/boot/bzImage; image_name=bzImage; cross=""; arch_config=$x86_config ;;
  arm64|aarch64) arch=arm64; karch=arm64; kmake_arch=arm64; image_rel=arch/arm64/boot/Image; image_name=Image; cross=aarch64-linux-gnu-; arch_config=$arm64_config ;;
  *) usage_error "unknown architecture '$arch' (x86_64 or arm64)" ;;
esac
if [ -n "$source_arg" ]; then
  [ -e "$source_arg" ] || usage_error "no kernel source '$source_arg' (a tarball or a tree)"
  source_arg=$(readlink -f "$source_arg")
  if [ -d "$source_arg" ]; then
    [ -f "$source_arg/Makefile" ] && [ -d "$source_arg/arch/$karch" ] || usage_error "'$source_arg' is not a Linux source tree (no Makefile or arch/$karch)"
  fi
fi

cache=${KPEMU_CACHE:-$root/.cache}/kernels-src
mkdir -p "$cache"

# --- build tools (installed when missing: CI runs on fresh machines) -------------------------
need_tools() {
  local missing=() t
  local -A pkg_of=([gcc]=build-essential [make]=build-essential [bc]=bc [bison]=bison [flex]=flex
                   [pahole]=dwarves [cpio]=cpio [rsync]=rsync [xz]=xz-utils [zstd]=zstd [perl]=perl)
  for t in gcc make bc bison flex pahole cpio rsync xz zstd perl; do
    command -v "$t" >/dev/null || missing+=("${pkg_of[$t]}")
  done
  [ -f /usr/include/libelf.h ] || [ -f /usr/include/elfutils/libelf.h ] || missing+=(libelf-dev)
  [ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
  [ "$arch" != arm64 ] || command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
  [ ${#missing[@]} -gt 0 ] || return 0
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [ "$(id -u)" = 0 ] || tools_error "build tools missing (${missing[*]}); install them with apt-get as root"
  command -v apt-get >/dev/null || tools_error "build tools missing (${missing[*]}) and apt-get is not available"
  log "installing ${missing[*]} with apt-get"
  apt-get update >"$cache/apt-install.log" 2>&1 || tools_error "apt-get update failed; see $cache/apt-install.log"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >>"$cache/apt-install.log" 2>&1 \
    || tools_error "apt-get install ${missing[*]} failed; see $cache/apt-install.log"
}
need_tools

# --- the source --------------------------------------------------------------------------------
# Sets $tarball or $tree, and $source_id (what the source is, for the hash and the log).
tarball=""; tree=""
if [ -z "$source_arg" ]; then
  suite=$(host_suite)
  dsrc="$cache/debian/$suite"
  if [ $refresh = 1 ] || [ ! -s "$dsrc/package" ] || [ ! -f "$(sed -n 's/^tarball=//p' "$dsrc/package" 2>/dev/null)" ]; then
    apt_setup "$dsrc/apt" amd64 "$suite"      # linux-source-* is Architecture: all
    apt_update
    # The newest linux-source-<series> the suite offers (e.g. bookworm: 6.1 and 6.12 -> 6.12).
    pkg=$(apt-cache "${aptopts[@]}" pkgnames linux-source- 2>/dev/null | grep -E '^linux-source-[0-9]+\.[0-9]+$' | sort -V | tail -n1 || true)
    [ -n "$pkg" ] || die "Debian $suite offers no linux-source-<version> package"
    deb=$(apt_download "$pkg")
    ver=$(dpkg-deb -f "$deb" Version)
    inner=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -E '^\./usr/src/linux-source-[0-9.]+\.tar\.[a-z0-9]+$' | head -n1 || true)
    [ -n "$inner" ] || die "$deb holds no /usr/src/linux-source-*.tar.*"
    rm -rf "$dsrc/extract"; mkdir -p "$dsrc/extract"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dsrc/extract" "$inner"
    rm -f "$dsrc"/linux-source-*.tar.*
    mv -f "$dsrc/extract/$inner" "$dsrc/"
    tb="$dsrc/$(basename "$inner")"
    { echo "package=$pkg"; echo "version=$ver"; echo "suite=$suite"; echo "tarball=$tb"; } > "$dsrc/package"
    rm -rf "$dsrc/extract" "$dsrc/apt"
  fi
  tarball=$(sed -n 's/^tarball=//p' "$dsrc/package")
  source_id="debian $(sed -n 's/^package=//p' "$dsrc/package") $(sed -n 's/^version=//p' "$dsrc/package")"
elif [ -d "$source_arg" ]; then
  tree=$source_arg
  source_id="tree $tree"
else
  tarball=$source_arg
  source_id="tarball $(basename "$tarball") sha256=$(sha256sum < "$tarball" | cut -c1-16)"
fi

# --- the unpacked tree -------------------------------------------------------------------------
if [ -n "$tarball" ]; then
  id=$(echo "$source_id" | sha256sum | cut -c1-12)
  tree="$cache/src/$id"
  if [ ! -f "$tree/.kpemu-unpacked" ]; then
    log "unpacking $(basename "$tarball")"
    rm -rf "$tree.tmp"; mkdir -p "$tree.tmp"
    tar -x -f "$tarball" -C "$tree.tmp" --strip-components=1 || die "cannot unpack $tarball"
    [ -f "$tree.tmp/Makefile" ] && [ -d "$tree.tmp/arch/$karch" ] || die "$tarball is not a Linux source tarball"
    rm -rf "$tree"; mv "$tree.tmp" "$tree"
    touch "$tree/.kpemu-unpacked"
  fi
fi
version=$(make -s -C "$tree" kernelversion 2>/dev/null | tail -n1)
[ -n "$version" ] || die "cannot tell the kernel version of $tree"

cc=${cross}gcc
cc_version=$("$cc" --version | head -n1)
hash=$(printf '%s\n' "$arch" "$source_id" "$cc_version" "$common_config" "$arch_config" "recipe 1" | sha256sum | cut -c1-12)
out="$cache/$arch-$version-$hash"
if [ -f "$out/.built" ] && [ -s "$out/$image_name" ] && [ -s "$out/vmlinux" ]; then
  log "cached: $out ($source_id)"
  echo "$out/$image_name"
  exit 0
fi

# --- configure and build -----------------------------------------------------------------------
build="$cache/build/$arch-$version-$hash"
mkdir -p "$build"
export KBUILD_BUILD_TIMESTAMP="1970-01-01 00:00:00 UTC" KBUILD_BUILD_USER=kpemu KBUILD_BUILD_HOST=kpemu KBUILD_BUILD_VERSION=1
export LC_ALL=C TZ=UTC
mk=(make -C "$tree" O="$build" ARCH="$kmake_arch" -j"$(nproc)")
[ -z "$cross" ] || mk+=(CROSS_COMPILE="$cross")
# Paths of the build machine stay out of the debug info (same kernel from any cache directory).
mk+=(KCFLAGS="-fdebug-prefix-map=$tree=/usr/src/linux -fdebug-prefix-map=$build=/usr/src/linux")
t0=$(date +%s)
log "configuring $arch $version ($source_id) in $build"
"${mk[@]}" tinyconfig >"$build/config.log" 2>&1 || { tail -n 20 "$build/config.log" >&2; die "make tinyconfig failed"; }
apply_config() {
  local opt val args=()
  while read -r opt val; do
    [ -n "$opt" ] || continue
    case "$val" in
      y) args+=(--enable "$opt") ;;
      n) args+=(--disable "$opt") ;;
      *) args+=(--set-val "$opt" "$val") ;;
    esac
  done <<<"$1"
  "$tree/scripts/config" --file "$build/.config" "${args[@]}"
}
# Twice with olddefconfig between: options that depend on others (KPROBE_EVENTS on KPROBES and
# TRACING, DEBUG_INFO_BTF on DEBUG_INFO) are kept only once their dependencies are in.
for pass in 1 2; do
  apply_config "$common_config"
  apply_config "$arch_config"
  "${mk[@]}" olddefconfig >>"$build/config.log" 2>&1 || { tail -n 20 "$build/config.log" >&2; die "make olddefconfig failed"; }
done
# Every request must have survived olddefconfig (a missing dependency shows here, not at boot).
# The arch's list overrides the common one (arm64: SMP is always on).
declare -A want=()
order=()
while read -r opt val; do
  [ -n "$opt" ] || continue
  [ -n "${want[$opt]+x}" ] || order+=("$opt")
  want[$opt]=$val
done <<<"$common_config$arch_config"
bad=()
for opt in "${order[@]}"; do
  val=${want[$opt]}
  case "$val" in
    y) grep -qx "CONFIG_$opt=y" "$build/.config" || bad+=("$opt=y") ;;
    n) ! grep -qE "^CONFIG_$opt=" "$build/.config" || grep -qx "CONFIG_$opt=n" "$build/.config" || bad+=("$opt=n") ;;
    *) grep -qE "^CONFIG_$opt=\"?$val\"?$" "$build/.config" || bad+=("$opt=$val") ;;
  esac
done
# Options this arch's kernel does not have (EARLY_PRINTK on arm64) are not errors.
filtered=()
for b in "${bad[@]}"; do
  o=${b%%=*}
  grep -rqsE --include='Kconfig*' --exclude-dir=arch "^(menu)?config $o\$" "$tree" \
    || grep -rqsE --include='Kconfig*' "^(menu)?config $o\$" "$tree/arch/$karch" || continue
  filtered+=("$b")
done
[ ${#filtered[@]} -eq 0 ] || die "the config lost ${filtered[*]} after olddefconfig (missing dependency?); see $build/.config"

log "building $arch $version (-j$(nproc); log: $build/build.log)"
"${mk[@]}" "$image_name" vmlinux >"$build/build.log" 2>&1 || { grep -E 'error|Error' "$build/build.log" | head -n 20 >&2; tail -n 10 "$build/build.log" >&2; die "the kernel build failed; see $build/build.log"; }
t1=$(date +%s)
[ -s "$build/$image_rel" ] || die "the build produced no $image_rel"

rm -rf "$out.tmp"; mkdir -p "$out.tmp"
cp "$build/$image_rel" "$out.tmp/$image_name"
cp "$build/vmlinux" "$out.tmp/vmlinux"
cp "$build/.config" "$out.tmp/config"
release=$(cat "$build/include/config/kernel.release" 2>/dev/null || echo "$version")
{
  echo "arch=$arch"
  echo "version=$version"
  echo "release=$release"
  echo "source=$source_id"
  echo "tree=$tree"
  echo "compiler=$cc_version"
  echo "build-seconds=$((t1 - t0))"
  echo "image-sha256=$(sha256sum < "$out.tmp/$image_name" | cut -d' ' -f1)"
} > "$out.tmp/build-info"
touch "$out.tmp/.built"
rm -rf "$out"; mv "$out.tmp" "$out"
rm -rf "$build"
log "built $out/$image_name in $((t1 - t0)) s"
echo "$out/$image_name"
exit 0
}
