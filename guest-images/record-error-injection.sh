#!/usr/bin/env bash
# Records the functions Linux lets fail_function (and BPF's bpf_override_return) fail, with their
# error types, for a Debian kernel built without CONFIG_FUNCTION_ERROR_INJECTION (Debian's own:
# they carry no _error_injection_whitelist): the list that kernel WOULD carry, derived from
# Debian's linux-source package of the same version by the rules of that version's source:
#   - every ALLOW_ERROR_INJECTION(FUNC, TYPE) written in the source (outside tools/, Documentation/,
#     samples/ and other architectures' arch/ directories), TYPE as written (ERRNO, ERRNO_NULL,
#     NULL, TRUE, FALSE: Linux's EI_ETYPE_* without the prefix);
#   - the system-call entries SYSCALL_DEFINEn(NAME) and COMPAT_SYSCALL_DEFINEn(NAME) make through
#     the architecture's asm/syscall_wrapper.h, all ERRNO: on x86-64 __x64_sys_NAME and
#     __ia32_sys_NAME (IA32 emulation) for SYSCALL_DEFINE, __ia32_compat_sys_NAME and
#     __x64_compat_sys_NAME (x32) for COMPAT_SYSCALL_DEFINE; on arm64 __arm64_sys_NAME and
#     __arm64_compat_sys_NAME;
# kept to the functions the kernel has: the text symbols (t, T) of its own /proc/kallsyms, recorded
# under QEMU by record-kallsyms.sh, without the weak ones (a system call the configuration leaves
# out keeps kernel/sys_ni.c's COND_SYSCALL stub of that name, a weak symbol that Linux's list does
# not hold); sorted (LC_ALL=C).
# The method is checked against a list Linux compiled: SourceKernelErrorInjectionTest's
# compiledErrorInjectionListIsTheSourceRule (the source-built 6.12 kernel's own
# _error_injection_whitelist against this script's --tree mode on the same tree).
#
#   guest-images/record-error-injection.sh [--out FILE] ARCH debian:SUITE@RELEASE
#       fetches linux-source-SERIES of that kernel's Debian version (private apt directories,
#       apt-private.sh), writes guest-images/reference/error-injection/ARCH/SERIES.list (or FILE)
#   guest-images/record-error-injection.sh --tree TREE --symbols FILE [--out FILE] ARCH
#       the same rules on an unpacked source tree, kept to the names in FILE (one per line, e.g. the
#       non-weak functions of a built vmlinux); writes FILE or stdout
#   exit: 0 written, 1 error (network, source, kpemu, QEMU), 2 usage
#
set -euo pipefail
{ # read whole before it runs (an edit of this file must not change a running one)
prog=record-error-injection
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/apt-private.sh"
. "$here/qemu-reference.sh"   # kpemu_cli
log() { echo "$prog: $*" >&2; }

usage="usage: record-error-injection.sh [--out FILE] ARCH debian:SUITE@RELEASE | --tree TREE --symbols FILE [--out FILE] ARCH"
out=""; tree=""; symbols=""; arch=""; kernel=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage_error "$usage"; out=$2; shift ;;
    --tree) [ $# -ge 2 ] || usage_error "$usage"; tree=$2; shift ;;
    --symbols) [ $# -ge 2 ] || usage_error "$usage"; symbols=$2; shift ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
    -*) usage_error "unknown option '$1'; $usage" ;;
    *) if [ -z "$arch" ]; then arch=$1; elif [ -z "$kernel" ]; then kernel=$1; else usage_error "$usage"; fi ;;
  esac
  shift
done
case "$arch" in
  x86_64|amd64) arch=x86_64; karch=x86 ;;
  arm64|aarch64) arch=arm64; karch=arm64 ;;
  *) usage_error "unknown architecture '$arch' (x86_64 or arm64); $usage" ;;
esac
if [ -n "$tree" ]; then
  [ -z "$kernel" ] && [ -n "$symbols" ] || usage_error "$usage"
  [ -f "$tree/Makefile" ] && [ -d "$tree/arch/$karch" ] || usage_error "'$tree' is not a Linux source tree"
  [ -f "$symbols" ] || usage_error "no symbols file '$symbols'"
else
  [[ "$kernel" =~ ^debian:([a-z-]+)@(.+)$ ]] || usage_error "$usage"
  suite=$(normalize_suite "${BASH_REMATCH[1]}"); release=${BASH_REMATCH[2]}
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C

# check_rules TREE: the tree makes its marks as the rules above say (else a newer Linux changed them:
# this script must learn the new rule before it records a list).
check_rules() {
  local t=$1 w="$1/arch/$karch/include/asm/syscall_wrapper.h" h="$1/include/asm-generic/error-injection.h" p
  [ -f "$w" ] || die "$w is missing: the system-call entries' rule is unknown for this tree"
  case "$karch" in
    x86) for p in 'ALLOW_ERROR_INJECTION(__##abi##_##name, ERRNO)' '__SYS_STUBx(x64, sys##name' '__SYS_STUBx(ia32, sys##name' \
                  '__SYS_STUBx(ia32, compat_sys##name' '__SYS_STUBx(x64, compat_sys##name'; do
           grep -qF "$p" "$w" || die "$w has no '$p': the x86 system-call rule changed"
         done ;;
    arm64) for p in 'ALLOW_ERROR_INJECTION(__arm64_sys##name, ERRNO)' 'ALLOW_ERROR_INJECTION(__arm64_compat_sys##name, ERRNO)'; do
           grep -qF "$p" "$w" || die "$w has no '$p': the arm64 system-call rule changed"
         done ;;
  esac
  grep -qF 'ALLOW_ERROR_INJECTION(fname, _etype)' "$h" && grep -qF 'EI_ETYPE_##_etype' "$h" \
    || die "$h does not define ALLOW_ERROR_INJECTION(fname, _etype) as EI_ETYPE_##_etype: the mark changed"
}

# derive TREE: "FUNCTION ETYPE" lines (unsorted, unfiltered) by the rules in the header.
derive() {
  local t=$1 files
  check_rules "$t"
  files="$work/files"
  (cd "$t" && find . \( -path ./tools -o -path ./Documentation -o -path ./samples -o -path ./scripts \
      -o \( -path './arch/*' ! -path "./arch/$karch" ! -path "./arch/$karch/*" \) \) -prune \
      -o -type f \( -name '*.c' -o -name '*.h' \) -print) > "$files"
  # ALLOW_ERROR_INJECTION(name, TYPE); with a plain name (the macros that paste names are the rules below)
  (cd "$t" && xargs -a "$files" -d '\n' grep -hoE 'ALLOW_ERROR_INJECTION\([A-Za-z_][A-Za-z0-9_]*, *[A-Z_]+\)' || true) \
    | sed -E 's/ALLOW_ERROR_INJECTION\(([A-Za-z0-9_]+), *([A-Z_]+)\)/\1 \2/'
  # SYSCALL_DEFINEn(name, ...) / COMPAT_SYSCALL_DEFINEn(name, ...) at the start of a line (not #define)
  (cd "$t" && xargs -a "$files" -d '\n' grep -hoE '^(COMPAT_)?SYSCALL_DEFINE[0-6]\([A-Za-z0-9_]+' || true) \
    | sed -E 's/^(COMPAT_)?SYSCALL_DEFINE[0-6]\(/\1 /' \
    | while read -r a b; do
        if [ -z "$b" ]; then   # SYSCALL_DEFINE: "name"
          case "$karch" in
            x86) echo "__x64_sys_$a ERRNO"; echo "__ia32_sys_$a ERRNO" ;;
            arm64) echo "__arm64_sys_$a ERRNO" ;;
          esac
        else                   # COMPAT_SYSCALL_DEFINE: "COMPAT_ name"
          case "$karch" in
            x86) echo "__ia32_compat_sys_$b ERRNO"; echo "__x64_compat_sys_$b ERRNO" ;;
            arm64) echo "__arm64_compat_sys_$b ERRNO" ;;
          esac
        fi
      done
}

# keep NAMES-FILE: the derived lines whose function is a name in NAMES-FILE, sorted, one per function
keep() {
  sort -u "$1" > "$work/names"
  sort -u "$work/derived" | awk 'NR==FNR {have[$1]=1; next} ($1 in have)' "$work/names" - | sort -u -k1,1
}

if [ -n "$tree" ]; then
  derive "$tree" > "$work/derived"
  version=$(make -s -C "$tree" kernelversion 2>/dev/null | tail -n1)
  keep "$symbols" > "$work/list"
  {
    echo "# error-injectable functions of the source tree $(basename "$tree") (Linux $version, $arch), by"
    echo "# guest-images/record-error-injection.sh --tree: ALLOW_ERROR_INJECTION marks and system-call entries,"
    echo "# kept to the names of $(basename "$symbols"); $(wc -l < "$work/list") functions"
    cat "$work/list"
  } > "$work/result"
  if [ -n "$out" ]; then mkdir -p "$(dirname "$out")"; cp "$work/result" "$out"; else cat "$work/result"; fi
  exit 0
fi

# --- a Debian kernel: its version, its linux-source, its kallsyms --------------------------------
spec="debian:$suite@$release"
version=$(kpemu_cli images --kernel "$spec" --arch "$arch" --print version) || die "kpemu cannot fetch $spec ($arch)"
full=$(kpemu_cli images --kernel "$spec" --arch "$arch" --print release)
series=$(echo "$version" | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
[ -n "$series" ] || die "cannot tell the series of Debian version '$version'"
out=${out:-$here/reference/error-injection/$arch/$series.list}

apt_setup "$work/apt" amd64 "$suite"     # linux-source-* is Architecture: all
apt_update
pkg="linux-source-$series"
deb=$(apt_download "$pkg=$version")
inner=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -E '^\./usr/src/linux-source-[0-9.]+\.tar\.[a-z0-9]+$' | head -n1 || true)
[ -n "$inner" ] || die "$deb holds no /usr/src/linux-source-*.tar.*"
log "unpacking $pkg $version (C files and headers)"
mkdir -p "$work/src"
case "$inner" in *.xz) z=-J ;; *.gz) z=-z ;; *.bz2) z=-j ;; *.zst) z=--zstd ;; *) z="" ;; esac
dpkg-deb --fsys-tarfile "$deb" | tar -x -O "$inner" | tar -x $z -C "$work/src" --strip-components=1 \
  --exclude='*/tools/*' --exclude='*/Documentation/*' --wildcards '*.c' '*.h' '*/Makefile' || die "cannot unpack $inner"
rm -rf "$work/apt"
mkdir -p "$work/src/arch/$karch"
derive "$work/src" > "$work/derived"

# The kernel's functions: Linux's own /proc/kallsyms under QEMU (record-kallsyms.sh), the text
# symbols (t, T) without the weak ones (W: kernel/sys_ni.c's COND_SYSCALL stubs of the system calls
# the configuration leaves out, which the source rule cannot tell from the real entries).
image=$(kpemu_cli images --kernel "$spec" --arch "$arch" --print kernel </dev/null) || die "kpemu cannot fetch $spec ($arch)"
"$here/record-kallsyms.sh" --out "$work/kallsyms.summary" "$arch" "$image" "$work/kallsyms" >"$work/kallsyms.log" 2>&1 \
  || { tail -n 20 "$work/kallsyms.log" >&2; die "record-kallsyms.sh failed on $spec ($arch)"; }
awk 'NF == 3 && ($2 == "t" || $2 == "T") {print $3}' "$work/kallsyms" > "$work/funcs"
weak=$(awk 'NF == 3 && ($2 == "w" || $2 == "W")' "$work/kallsyms" | wc -l)
keep "$work/funcs" > "$work/list"
[ -s "$work/list" ] || die "no error-injectable function found in $spec ($arch)"
mkdir -p "$(dirname "$out")"
{
  echo "# Error-injectable functions of Debian's $full ($suite, Debian version $version) as the kernel's"
  echo "# _error_injection_whitelist would hold them (Debian builds without CONFIG_FUNCTION_ERROR_INJECTION):"
  echo "# derived from Debian's $pkg $version (ALLOW_ERROR_INJECTION marks; SYSCALL_DEFINE /"
  echo "# COMPAT_SYSCALL_DEFINE entries through arch/$karch/include/asm/syscall_wrapper.h), kept to the"
  echo "# $(wc -l < "$work/funcs") text symbols (t, T) of its /proc/kallsyms under QEMU (record-kallsyms.sh;"
  echo "# its $weak weak symbols left out, among them sys_ni.c's stubs of the system calls the configuration leaves out)."
  echo "# Recorded by: guest-images/record-error-injection.sh $arch $spec"
  echo "# FUNCTION ETYPE ($(wc -l < "$work/list") functions; ETYPE: Linux's EI_ETYPE_* without the prefix)"
  cat "$work/list"
} > "$out.tmp"
mv "$out.tmp" "$out"
log "wrote $out ($(wc -l < "$work/list") functions)"
exit 0
}
