# Sourced by guest-images/fetch-*.sh: private apt directories for one Debian architecture.
# Changes nothing on the system: own lists, own cache, own sources, dpkg status = /dev/null.
# The mirror and the suite come from the machine's own apt sources and /etc/os-release.
#
# Provides: die, debarch_of ARCH, apt_setup WORKDIR DEBARCH (sets the array aptopts), apt_update.

die() { echo "${prog:-guest-images}: $*" >&2; exit 1; }

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
  local work=$1 debarch=$2 mirror secmirror suite
  command -v apt-get >/dev/null || die "apt-get is not available; guest images come from Debian's archive"
  command -v dpkg-deb >/dev/null || die "dpkg-deb is not available"
  mirror=$(_find_mirror '/debian/?$')
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources"
  secmirror=$(_find_mirror '/debian-security/?$')
  suite=$( . /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")
  [ -n "$suite" ] || suite=bookworm
  rm -rf "$work"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/etc/sources.list.d" "$work/etc/preferences.d" "$work/debs"
  {
    echo "deb [trusted=yes] $mirror $suite main"
    echo "deb [trusted=yes] $mirror $suite-updates main"
    [ -n "$secmirror" ] && echo "deb [trusted=yes] $secmirror $suite-security main"
  } > "$work/etc/sources.list"
  aptopts=(-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
           -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/sources.list.d"
           -o Dir::Etc::Preferences="$work/etc/preferences" -o Dir::Etc::PreferencesParts="$work/etc/preferences.d"
           -o Dir::State::status=/dev/null -o Debug::NoLocking=1
           -o APT::Architecture="$debarch" -o APT::Architectures="$debarch"
           -o Acquire::Languages=none -o Acquire::Retries=2 -o Acquire::http::Timeout=60)
  apt_work=$work
  apt_suite=$suite
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
apt_download() {
  local pkg=$1 deb
  (cd "$apt_work/debs" && apt-get "${aptopts[@]}" download "$pkg" >"$apt_work/download.log" 2>&1) \
    || die "apt-get download $pkg failed (network or mirror); see $apt_work/download.log"
  deb=$(ls "$apt_work"/debs/"${pkg}"_*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] && [ -s "$deb" ] || die "apt-get download $pkg produced no .deb"
  echo "$deb"
}

# Parses the scripts' common arguments "[--refresh] x86_64|arm64" into $refresh and $arch;
# $1 is the range of the calling script's header lines that --help prints (e.g. 2,8).
parse_arch_args() {
  local help=$1; shift
  refresh=0; arch=""
  for a in "$@"; do
    case "$a" in
      --refresh) refresh=1 ;;
      -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
      -*) die "unknown option '$a'" ;;
      *) [ -z "$arch" ] || die "only one architecture may be given"; arch=$a ;;
    esac
  done
  [ -n "$arch" ] || die "usage: $(basename "$0") [--refresh] x86_64|arm64"
}
