# Sourced by guest-images/fetch-*.sh: private apt directories for one Debian architecture.
# Changes nothing on the system: own lists, own cache, own sources, dpkg status = /dev/null.
# The mirror comes from the machine's own apt sources; the suite from /etc/os-release unless
# given (fetch-kernel.sh --suite).
#
# Provides: die, usage_error, host_suite, normalize_suite SUITE, debarch_of ARCH,
# apt_setup WORKDIR DEBARCH [SUITE] (sets the array aptopts), apt_update, apt_download PKG.

die() { echo "${prog:-guest-images}: $*" >&2; exit 1; }
usage_error() { echo "${prog:-guest-images}: $*" >&2; exit 2; }

# The machine's own Debian suite (VERSION_CODENAME of /etc/os-release; bookworm when unknown).
host_suite() {
  local s
  s=$( . /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")
  echo "${s:-bookworm}"
}

# The suites a guest kernel may come from: release names, the archive's aliases, and the
# -backports suites of the stable releases. unstable is sid (one name in the cache).
# Keep in step with dev.kpemu.image.KernelChoice.SUITES.
normalize_suite() {
  case "$1" in
    bookworm|trixie|stable|oldstable|sid) echo "$1" ;;
    unstable) echo sid ;;
    bookworm-backports|trixie-backports|stable-backports|oldstable-backports) echo "$1" ;;
    *) usage_error "unknown Debian suite '$1' (bookworm, trixie, stable, oldstable, sid or unstable, <stable suite>-backports)" ;;
  esac
}

# kpemu architecture name -> Debian architecture name
debarch_of() {
  case "$1" in
    x86_64|amd64) echo amd64 ;;
    arm64|aarch64) echo arm64 ;;
    *) die "unknown architecture '$1' (expected x86_64 or arm64)" ;;
  esac
}

# Prints "URI" of the first source whose URI matches the grep pattern $1 (deb822 or one-line format).
_find_mirror() {
  local pat=$1 m="" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    m=$(awk '/^URIs:/ {for (i=2;i<=NF;i++) print $i}' "$f" | grep -E -- "$pat" | head -n1 || true)
    [ -n "$m" ] && break
  done
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i}}' /etc/apt/sources.list | grep -E -- "$pat" | head -n1 || true)
  fi
  echo "${m%/}"
}

apt_setup() {
  local work=$1 debarch=$2 suite=${3:-} mirror secmirror base
  command -v apt-get >/dev/null || die "apt-get is not available; guest images come from Debian's archive"
  command -v dpkg-deb >/dev/null || die "dpkg-deb is not available"
  mirror=$(_find_mirror '/debian/?$')
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources"
  secmirror=$(_find_mirror '/debian-security/?$')
  [ -n "$suite" ] || suite=$(host_suite)
  base=${suite%-backports}
  [ -n "$secmirror" ] || secmirror=$(echo "$mirror" | sed -E 's#/debian$#/debian-security#')
  rm -rf "$work"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/etc/sources.list.d" "$work/etc/preferences.d" "$work/debs"
  {
    echo "deb [trusted=yes] $mirror $base main"
    if [ "$base" != sid ] && [ "$base" != unstable ]; then    # unstable has no -updates nor -security
      echo "deb [trusted=yes] $mirror $base-updates main"
      echo "deb [trusted=yes] $secmirror $base-security main"
    fi
    [ "$base" = "$suite" ] || echo "deb [trusted=yes] $mirror $suite main"
  } > "$work/etc/sources.list"
  aptopts=(-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
           -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/sources.list.d"
           -o Dir::Etc::Preferences="$work/etc/preferences" -o Dir::Etc::PreferencesParts="$work/etc/preferences.d"
           -o Dir::State::status=/dev/null -o Debug::NoLocking=1
           -o APT::Architecture="$debarch" -o APT::Architectures="$debarch"
           -o Acquire::Languages=none -o Acquire::Retries=2 -o Acquire::http::Timeout=60)
  # -backports packages are NotAutomatic (priority 1): pin the suite so its newest is the candidate.
  [ "$base" = "$suite" ] || aptopts+=(-o APT::Default-Release="$suite")
  apt_work=$work
  apt_suite=$suite
  apt_mirror=$mirror
}

apt_update() {
  apt-get "${aptopts[@]}" update >"$apt_work/update.log" 2>&1 \
    || die "apt-get update against the machine's Debian mirror failed (network or apt unavailable); see $apt_work/update.log"
  # apt-get update exits 0 when indexes fail to download; treat that as a failure too.
  if grep -qE '^(W: Failed to fetch|E: )' "$apt_work/update.log"; then
    die "apt-get update could not fetch the Debian indexes (network or mirror down): $(grep -m1 -E '^(W: Failed to fetch|E: )' "$apt_work/update.log" | cut -c1-160)"
  fi
}

# apt_download PKG: downloads PKG's candidate .deb into $apt_work/debs and prints its path.
# Progress goes to stderr (one line per 10%; kpemu's stdout is for traces).
apt_download() {
  local pkg=$1 deb size rc
  size=$(apt-cache "${aptopts[@]}" show "$pkg" 2>/dev/null | awk '$1=="Size:" {print $2; exit}')
  echo "${prog:-guest-images}: downloading $pkg ($(( ${size:-0} / 1048576 )) MiB) from $apt_mirror" >&2
  set +e
  (cd "$apt_work/debs" && apt-get "${aptopts[@]}" -o APT::Status-Fd=3 download "$pkg" 3>&1 >"$apt_work/download.log" 2>&1) \
    | awk -v p="${prog:-guest-images}: $pkg" -F: '$1=="dlstatus" { n = int($3 / 10) * 10; if (n > last) { printf "%s %d%%\n", p, n > "/dev/stderr"; last = n } }'
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || die "apt-get download $pkg failed (network or mirror); see $apt_work/download.log"
  deb=$(ls "$apt_work"/debs/"${pkg%%=*}"_*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] && [ -s "$deb" ] || die "apt-get download $pkg produced no .deb"
  echo "$deb"
}

# Parses the scripts' common arguments "[--refresh] x86_64|arm64" into $refresh and $arch;
# $1 is the range of the calling script's header lines that --help prints (e.g. 2,8).
# With parse_suite=1 set by the caller, also "--suite SUITE" into $suite (empty: host's) and
# "--resolve" into $resolve_only.
parse_arch_args() {
  local help=$1; shift
  refresh=0; arch=""; suite=""; resolve_only=0; want_release=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --refresh) refresh=1 ;;
      --suite) [ "${parse_suite:-0}" = 1 ] || usage_error "unknown option '$1'"
               [ $# -ge 2 ] || usage_error "--suite needs a value"; suite=$2; shift ;;
      --suite=*) [ "${parse_suite:-0}" = 1 ] || usage_error "unknown option '$1'"; suite=${1#--suite=} ;;
      --resolve) [ "${parse_suite:-0}" = 1 ] || usage_error "unknown option '$1'"; resolve_only=1 ;;
      --release) [ "${parse_suite:-0}" = 1 ] || usage_error "unknown option '$1'"
                 [ $# -ge 2 ] || usage_error "--release needs a value"; want_release=$2; shift ;;
      --release=*) [ "${parse_suite:-0}" = 1 ] || usage_error "unknown option '$1'"; want_release=${1#--release=} ;;
      -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
      -*) usage_error "unknown option '$1'" ;;
      *) [ -z "$arch" ] || usage_error "only one architecture may be given"; arch=$1 ;;
    esac
    shift
  done
  [ -n "$arch" ] || usage_error "usage: $(basename "$0") [--refresh]${parse_suite:+ [--suite SUITE] [--release RELEASE] [--resolve]} x86_64|arm64"
}

# full_release RELEASE DEBARCH: the kernel release (uname -r) a --release value names for one
# architecture: 6.12.117+deb13 -> 6.12.117+deb13-amd64; a value that already ends in the
# architecture is kept; one that ends in the other architecture is a usage error.
full_release() {
  local r=$1 debarch=$2
  [[ "$r" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || usage_error "bad kernel release '$r' (as uname -r prints it, e.g. 6.12.117+deb13 or 6.12.117+deb13-amd64)"
  case "$r" in
    *-"$debarch") echo "$r" ;;
    *-amd64|*-arm64) usage_error "kernel release '$r' is not an $debarch kernel" ;;
    *) echo "$r-$debarch" ;;
  esac
}

# kernel_cache_dir GUESTDIR SUITE ARCH DEBARCH [RELEASE]: where one kernel is cached: the suite's
# newest in GUESTDIR/SUITE/ARCH, a kernel named by release in GUESTDIR/SUITE@RELEASE/ARCH
# (the release without its architecture suffix: the same name for both architectures).
kernel_cache_dir() {
  local guest=$1 suite=$2 arch=$3 debarch=$4 rel=${5:-}
  if [ -z "$rel" ]; then echo "$guest/$suite/$arch"; return; fi
  rel=$(full_release "$rel" "$debarch")
  echo "$guest/$suite@${rel%-"$debarch"}/$arch"
}
