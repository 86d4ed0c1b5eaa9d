package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.image.Initramfs;
import dev.kpemu.natives.NativeLibraries;

/**
 * kpemu's {@code PATH:SYMBOL[+OFFS]} uprobe places: the user program of the uprobe recordings
 * (guest-images/programs/uprobe-target.c built by build-uprobe-target.sh) resolved to the file
 * offsets binutils gave record-uprobes-prog.sh (its recording's header, for the same build); Linux's
 * own places left alone; a stripped file, a file that is no ELF, an unknown symbol refused in one line.
 */
class UprobeSymbolPlacesTest {
    @ParameterizedTest
    @ValueSource(strings = {"x86_64", "arm64"})
    void symbolsResolveToTheOffsetsBinutilsFound(String arch, @TempDir Path tmp) throws Exception {
        Path root = NativeLibraries.repositoryRoot();
        Path prog = tmp.resolve("uprobe-target");
        Process b = new ProcessBuilder("bash", root.resolve("guest-images/build-uprobe-target.sh").toString(), arch, prog.toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        b.getInputStream().readAllBytes();
        assertEquals(0, b.waitFor(), "build-uprobe-target.sh " + arch);
        byte[] bytes = Files.readAllBytes(prog);
        String header = Files.readAllLines(root.resolve("guest-images/reference/" + arch + "/6.1/uprobes-prog.trace")).stream()
                .filter(l -> l.startsWith("# program: ")).findFirst().orElseThrow();
        Matcher h = Pattern.compile("sha256 ([0-9a-f]{16}); @FACT@ = (0x[0-9a-f]+) \\(fact\\), @GREET@ = (0x[0-9a-f]+) \\(greet\\)").matcher(header);
        assertTrue(h.find(), header);
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes)).substring(0, 16);
        Assumptions.assumeTrue(sha.equals(h.group(1)), "the recording's program is another build than this host's compiler made");
        long fact = Long.decode(h.group(2)), greet = Long.decode(h.group(3));

        Path stripped = tmp.resolve("stripped");
        Process s = new ProcessBuilder(arch.equals("x86_64") ? "strip" : "aarch64-linux-gnu-strip", "-o", stripped.toString(), prog.toString())
                .redirectErrorStream(true).start();
        s.getInputStream().readAllBytes();
        assertEquals(0, s.waitFor(), "strip");
        GuestFiles files = new InitramfsFiles(new Initramfs().dir("bin", 0755).file("uprobe-target", 0755, bytes)
                .symlink("bin/target", "../uprobe-target").file("stripped", 0755, Files.readAllBytes(stripped))
                .file("script", 0755, "#!/bin/sh\n".getBytes(StandardCharsets.US_ASCII)).entries());

        assertEquals(fact, UprobeSymbolPlaces.offsetOf("/uprobe-target", "fact", files));
        assertEquals("p:f /uprobe-target:0x" + Long.toHexString(fact) + " n=%di",
                UprobeSymbolPlaces.resolve("p:f /uprobe-target:fact n=%di", files));
        assertEquals("r /bin/target:0x" + Long.toHexString(greet + 4), UprobeSymbolPlaces.resolve("r /bin/target:greet+4", files));
        assertEquals("p /uprobe-target:0x" + Long.toHexString(fact) + "%return", UprobeSymbolPlaces.resolve("p /uprobe-target:fact%return", files));
        List<String> names = UprobeSymbolPlaces.functions("/uprobe-target", files).stream().map(UprobeSymbolPlaces.Function::name).toList();
        assertTrue(names.containsAll(List.of("fact", "greet", "main")), names.toString());

        assertEquals("kpemu: /uprobe-target: no symbol 'nope' in its .symtab or .dynsym",
                assertThrows(UprobeSymbolPlaces.Unresolved.class, () -> UprobeSymbolPlaces.resolve("p /uprobe-target:nope", files)).getMessage());
        assertEquals("kpemu: /stripped: stripped (no .symtab or .dynsym): give the place as PATH:OFFSET",
                assertThrows(UprobeSymbolPlaces.Unresolved.class, () -> UprobeSymbolPlaces.resolve("p /stripped:fact", files)).getMessage());
        assertTrue(assertThrows(UprobeSymbolPlaces.Unresolved.class, () -> UprobeSymbolPlaces.resolve("p /script:main", files))
                .getMessage().startsWith("kpemu: /script: not an ELF file kpemu can read ("));
        assertEquals("kpemu: /missing: no such file in the guest's initramfs (ENOENT)",
                assertThrows(UprobeSymbolPlaces.Unresolved.class, () -> UprobeSymbolPlaces.resolve("p /missing:main", files)).getMessage());
        assertTrue(assertThrows(UprobeSymbolPlaces.Unresolved.class, () -> UprobeSymbolPlaces.resolve("p /uprobe-target:fact+x", files))
                .getMessage().contains("'x' is not an offset"));
    }

    /** Places Linux takes (a digit after the last ':') or refuses for another reason stay as written: its parser answers them. */
    @Test
    void linuxPlacesAreLeftAlone() {
        GuestFiles none = path -> new GuestFiles.Lookup(dev.kpemu.kprobes.Errno.ENOENT, false, null);
        for (String line : List.of("p /bin/busybox:0x10", "p /bin/busybox:16 a=%di", "p busybox:main", "p /bin/busybox:", "p:x do_sys_open", "-:ev")) {
            assertEquals(line, UprobeSymbolPlaces.resolve(line, none), line);
        }
        assertTrue(UprobeSymbolPlaces.isSymbolPlace("/bin/prog:main"));
        assertFalse(UprobeSymbolPlaces.isSymbolPlace("/bin/prog:0x10"));
        assertFalse(UprobeSymbolPlaces.isSymbolPlace("prog:main"));
    }
}
