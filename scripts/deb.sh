#!/usr/bin/env bash
# Builds kpemu's Debian package from the release tree scripts/dist.sh made (./kpemu deb runs both):
#   dist/kpemu_VERSION_ARCH.deb  installing
#     /usr/lib/kpemu/{bin,lib,runtime,legal}   the release tree (bin/kpemu, jars, natives, jlink runtime)
#     /usr/bin/kpemu                          a symlink to /usr/lib/kpemu/bin/kpemu
#     /usr/share/man/man1/kpemu*.1.gz          picocli's generated pages (kpemu-manpages, AsciidoctorJ)
#     /usr/share/bash-completion/completions/kpemu   picocli's AutoComplete
#     /usr/share/doc/kpemu/                    copyright (pointing at the bundled licences), README
# Depends: what the bundled binaries and the guest fetch scripts need (docs/reference.md, "Installed kpemu").
#   scripts/deb.sh        (JAVA_HOME: the JDK 25 that built kpemu; run after scripts/dist.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "deb: $*" >&2; exit 1; }
tree=$(ls -d "$root"/dist/kpemu-*/ 2>/dev/null | head -n1); tree=${tree%/}
[ -d "$tree" ] && [ -x "$tree/bin/kpemu" ] || die "no release tree in dist/: run scripts/dist.sh first"
version=${tree##*/kpemu-}
debversion=${version//-/\~}              # 0.1.0-SNAPSHOT -> 0.1.0~SNAPSHOT (sorts before 0.1.0)
debarch=$(dpkg --print-architecture)
stage="$root/dist/deb/kpemu_${debversion}_$debarch"
rm -rf "$stage"; mkdir -p "$stage/DEBIAN" "$stage/usr/lib/kpemu" "$stage/usr/bin" "$stage/usr/share/man/man1" \
  "$stage/usr/share/bash-completion/completions" "$stage/usr/share/doc/kpemu"

cp -a "$tree/bin" "$tree/lib" "$tree/runtime" "$tree/legal" "$stage/usr/lib/kpemu/"
ln -s ../lib/kpemu/bin/kpemu "$stage/usr/bin/kpemu"

# man pages and completion from the CLI's own picocli model
gen="$root/dist/deb/generated"
rm -rf "$gen"
[ -d "$root/manpages/target/lib" ] || die "manpages/target/lib missing: build first (./kpemu deb builds)"
"$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -cp "$root/manpages/target/classes:$root/manpages/target/lib/*" \
  dev.kpemu.manpages.ManPages "$gen" >/dev/null 2>"$root/dist/deb/manpages.log" || die "man page generation failed; see dist/deb/manpages.log"
for m in "$gen"/man1/*.1; do gzip -9n <"$m" >"$stage/usr/share/man/man1/$(basename "$m").gz"; done
cp "$gen/bash-completion/kpemu" "$stage/usr/share/bash-completion/completions/kpemu"

cp "$tree/README.md" "$stage/usr/share/doc/kpemu/README.md"
cat >"$stage/usr/share/doc/kpemu/copyright" <<'TEXT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: kpemu
Comment: kpemu bundles a Java runtime, Java libraries and native engines; their licences are in
 /usr/lib/kpemu/legal (THIRD-PARTY.txt lists each library: Unicorn GPL-2 in unicorn.copyright,
 Capstone BSD-3-clause in capstone.copyright, the Maven libraries' licences) and
 /usr/lib/kpemu/runtime/legal (the Java runtime: GPL-2 with the Classpath Exception).
TEXT

# Depends: the bundled binaries need glibc 2.34 (the newest symbol version they use, objdump -T);
# the Java runtime's AWT libraries (X11, ALSA) are never loaded by kpemu (headless), so not
# declared. The guest fetch scripts run apt-get and dpkg-deb (and bash, awk, sed, tar: essential).
glibc=$(for f in $(find "$stage/usr/lib/kpemu" -name '*.so*' -type f) "$stage/usr/lib/kpemu/runtime/bin/java"; do
          objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'; done | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -u | tail -n1)
[ -n "$glibc" ] || die "could not read the bundled binaries' glibc versions (objdump)"
size=$(du -sk "$stage/usr" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: kpemu
Version: $debversion
Architecture: $debarch
Installed-Size: $size
Depends: libc6 (>= $glibc), apt, dpkg
Section: devel
Priority: optional
Maintainer: kpemu project <kpemu@invalid>
Description: full-system emulator that boots Linux kernels and probes them from outside
 kpemu boots unmodified Debian Linux kernels (x86-64, arm64) on Unicorn and runs a kprobes
 engine from outside the guest: kprobe_events definitions, traces in ftrace's format, Java
 probes. It carries its own Java runtime, Unicorn and Capstone; guest kernels and busybox are
 fetched from Debian's archive on first use into ~/.cache/kpemu.
CONTROL
out="$root/dist/kpemu_${debversion}_$debarch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null || die "dpkg-deb --build failed"
echo "$out"
