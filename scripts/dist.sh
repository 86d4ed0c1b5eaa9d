#!/usr/bin/env bash
# Builds kpemu's release archive from a packaged build (./kpemu dist runs it after building):
#   dist/kpemu-VERSION-linux-ARCH.tar.gz, one directory kpemu-VERSION/ with
#     bin/kpemu        the command (works from any directory and through a symlink)
#     runtime/         a jlink image of the JDK modules kpemu uses (jdeps), no JDK needed
#     lib/*.jar        kpemu's jars and the Maven libraries they use
#     lib/native/      the native engines for this host arch (Unicorn, Capstone, kpemu's hooks)
#     legal/           the licences of what is bundled (the JDK's are in runtime/legal)
#   Prints the archive's path. Also leaves the unpacked tree in dist/kpemu-VERSION (scripts/deb.sh
#   packages the same content).
#
#   scripts/dist.sh NATIVES_DIR      (JAVA_HOME: the JDK 25 that built kpemu)
#   scripts/dist.sh --host-arch arm64 NATIVES_DIR JMODS_DIR
#     the archive for another host arch (only arm64 from x86-64): NATIVES_DIR holds that arch's
#     engines (KPEMU_NATIVES_ARCH=arm64 scripts/fetch-natives.sh), JMODS_DIR that arch's JDK 25
#     jmods (scripts/fetch-cross-host.sh arm64); this JDK's jlink makes the runtime from them, its
#     native code stripped by aarch64-linux-gnu-objcopy (guest-images/static-cc.sh arm64 installs
#     it). The tree is dist/linux-aarch64/kpemu-VERSION, the archive dist/kpemu-VERSION-linux-aarch64.tar.gz.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "dist: $*" >&2; exit 1; }
host_arch=$(uname -m); jmods=""
if [ "${1:-}" = --host-arch ]; then
  case "${2:-}" in
    arm64|aarch64) host_arch=aarch64 ;;
    x86_64|amd64) host_arch=x86_64 ;;
    *) echo "dist: --host-arch takes x86_64 or arm64, not '${2:-}'" >&2; exit 2 ;;
  esac
  shift 2
fi
natives=${1:?usage: scripts/dist.sh [--host-arch ARCH] NATIVES_DIR [JMODS_DIR]}
[ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/jlink" ] || die "JAVA_HOME must name a JDK 25 with jlink"
strip_opts=(--strip-debug)
if [ "$host_arch" != "$(uname -m)" ]; then
  [ "$host_arch" = aarch64 ] && [ "$(uname -m)" = x86_64 ] || die "only an aarch64 archive can be cross-built, from x86_64"
  jmods=${2:?usage: scripts/dist.sh --host-arch arm64 NATIVES_DIR JMODS_DIR}
  [ -f "$jmods/java.base.jmod" ] || die "$jmods has no java.base.jmod (scripts/fetch-cross-host.sh arm64 fetches the arm64 jmods)"
  objcopy=$(command -v aarch64-linux-gnu-objcopy) || die "aarch64-linux-gnu-objcopy missing (guest-images/static-cc.sh arm64 installs it)"
  # this machine's objcopy cannot read arm64 code: the cross one strips the runtime's libraries
  # (Debian's jmods also carry each library's separate debug file, *.debuginfo: left out)
  strip_opts=(--strip-java-debug-attributes --strip-native-debug-symbols "objcopy=$objcopy" --exclude-files '**.debuginfo')
fi

jar=$(ls "$root"/cli/target/kpemu-cli-*.jar 2>/dev/null | grep -v -- '-tests.jar' | head -n1)
[ -f "$jar" ] || die "cli/target/kpemu-cli-*.jar missing: build first (./kpemu dist builds)"
version=$(basename "$jar" .jar); version=${version#kpemu-cli-}
arch=$host_arch
name=kpemu-$version
out="$root/dist"
tree="$out/$name"
# another arch's tree beside the host's, which scripts/deb.sh packages
[ -z "$jmods" ] || tree="$out/linux-$arch/$name"
rm -rf "$tree"; mkdir -p "$tree/bin" "$tree/lib/native" "$tree/legal"

cp "$jar" "$root"/cli/target/lib/*.jar "$tree/lib/"
# kpemu-base's jar carries the natives for a library user; here they are in lib/native (bin/kpemu
# names the directory), so the release's copy of the jar drops them rather than carry them twice
command -v zip >/dev/null || die "zip is needed to drop the bundled natives from the release's kpemu-base jar"
zip -q -d "$tree"/lib/kpemu-base-*.jar 'dev/kpemu/natives/linux-*' >/dev/null || die "could not drop the natives from kpemu-base's jar"
for f in libunicorn.so.2 libcapstone.so libkpemu_clock.so versions SHA256SUMS; do
  [ -f "$natives/$f" ] || die "$natives/$f missing (scripts/fetch-natives.sh makes it)"
  cp "$natives/$f" "$tree/lib/native/"
done

# The JDK modules kpemu's classes and libraries need, as jdeps finds them; jdk.zipfs and the
# charsets for reading archives and guest text in any encoding; jdk.crypto.ec is not needed (no TLS).
modules=$("$JAVA_HOME/bin/jdeps" --multi-release 25 --ignore-missing-deps --print-module-deps \
          --class-path "$tree/lib/*" "$tree"/lib/kpemu-*.jar 2>/dev/null | tail -n1)
[ -n "$modules" ] || die "jdeps found no modules"
modules="$modules,jdk.zipfs,jdk.charsets"
"$JAVA_HOME/bin/jlink" ${jmods:+--module-path "$jmods"} --add-modules "$modules" "${strip_opts[@]}" --no-header-files --no-man-pages \
    --compress zip-6 --output "$tree/runtime" >/dev/null || die "jlink failed"

cat >"$tree/bin/kpemu" <<'SCRIPT'
#!/bin/sh
# kpemu: runs the bundled Java runtime on the bundled jars and native engines, from wherever this
# directory is (also through a symlink, e.g. /usr/bin/kpemu). Guest kernels and busybox are fetched
# on first use into $XDG_CACHE_HOME/kpemu (else ~/.cache/kpemu; --cache DIR, KPEMU_CACHE).
here=$(dirname "$(readlink -f "$0")")
home=$(dirname "$here")
# JIT, GC and flags as the repository's launcher (./kpemu) runs short sessions; KPEMU_JAVA_OPTS appended.
# KPEMU_RUNTIME_WRAPPER: a command the runtime runs under, e.g. "qemu-aarch64 -L ROOT" to try an
# aarch64 archive on an x86-64 machine
exec ${KPEMU_RUNTIME_WRAPPER:-} "$home/runtime/bin/java" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms32m -XX:-UsePerfData -Xss4m \
  --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
  -Dkpemu.natives="$home/lib/native" -Dkpemu.root=none ${KPEMU_JAVA_OPTS:-} \
  -cp "$home/lib/*" dev.kpemu.cli.Main "$@"
SCRIPT
chmod 755 "$tree/bin/kpemu"

# Licences: Unicorn (GPL-2) and Capstone (BSD-3) as Debian ships them, every Maven library's from
# its jar or its POM, the JDK's under runtime/legal (jlink puts them there).
deb_docs="$natives/../root/usr/share/doc"
cp "$deb_docs/libunicorn2t64/copyright" "$tree/legal/unicorn.copyright" 2>/dev/null || die "Unicorn's copyright file missing under $deb_docs"
cp "$deb_docs/libcapstone5/copyright" "$tree/legal/capstone.copyright" 2>/dev/null || die "Capstone's copyright file missing under $deb_docs"
{
  echo "Libraries bundled in lib/ (kpemu-*.jar are kpemu's own) and their licences, from each jar's POM:"
  echo
  for j in "$tree"/lib/*.jar; do
    b=$(basename "$j")
    case "$b" in kpemu-*) continue ;; esac
    pom=$(unzip -Z1 "$j" 2>/dev/null | grep -m1 '^META-INF/maven/.*/pom.xml$' || true)
    lic=""
    [ -n "$pom" ] && lic=$(unzip -p "$j" "$pom" | tr -d '\r\n' | grep -o '<licenses>.*</licenses>' | grep -o '<name>[^<]*</name>' | sed 's/<[^>]*>//g' | paste -sd ';' - || true)
    if [ -z "$lic" ]; then   # the POM in the local Maven repository the build used
      p=$(find "${MAVEN_REPO:-$HOME/.m2/repository}" -name "${b%.jar}.pom" 2>/dev/null | head -n1)
      [ -n "$p" ] && lic=$(tr -d '\r\n' <"$p" | grep -o '<licenses>.*</licenses>' | grep -o '<name>[^<]*</name>' | sed 's/<[^>]*>//g' | paste -sd ';' - || true)
    fi
    if [ -z "$lic" ]; then
      lic=$(unzip -p "$j" META-INF/MANIFEST.MF 2>/dev/null | tr -d '\r' | sed -n 's/^Bundle-License: //p' | head -n1)
    fi
    echo "$b: ${lic:-see the licence file below}"
    for l in $(unzip -Z1 "$j" 2>/dev/null | grep -iE '^(META-INF/)?(LICENSE|LICENCE|NOTICE|COPYING)[^/]*$' || true); do
      mkdir -p "$tree/legal/$b"; unzip -p "$j" "$l" >"$tree/legal/$b/$(basename "$l")"
    done
  done
  echo
  echo "libunicorn.so.2: GPL-2 (legal/unicorn.copyright); libcapstone.so: BSD-3-clause (legal/capstone.copyright);"
  echo "the Java runtime: GPL-2 with the Classpath Exception (runtime/legal)."
} >"$tree/legal/THIRD-PARTY.txt"
cp "$root/README.md" "$tree/README.md"

tarball="$out/$name-linux-$arch.tar.gz"
tar -C "$(dirname "$tree")" -czf "$tarball.tmp" "$name" && mv -f "$tarball.tmp" "$tarball"
echo "$tarball"
