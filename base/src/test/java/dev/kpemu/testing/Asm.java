package dev.kpemu.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import keystone.Keystone;
import keystone.KeystoneArchitecture;
import keystone.KeystoneEncoded;
import keystone.KeystoneMode;

/**
 * Assembles small guest programs for tests.
 *
 * <p>arm64 uses Keystone (Maven Central). x86-64 uses GNU {@code as} + {@code objcopy} from binutils,
 * which every machine of this kind has with gcc: iced-x86, the planned Java assembler, is not
 * served by the Maven Central this workplace reaches (HTTP 404 for every version).
 */
public final class Asm {
    private Asm() {}

    /** Assembles AT&T or Intel-syntax x86-64 (prefix the source with {@code .intel_syntax noprefix}) at {@code origin}. */
    public static byte[] x86(String source, long origin) {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("kpemu-asm");
            Path s = dir.resolve("a.s"), o = dir.resolve("a.o"), e = dir.resolve("a.elf"), b = dir.resolve("a.bin");
            Files.writeString(s, ".code64\n.text\n" + source + "\n");
            run(dir, "as", "--64", "-o", o.toString(), s.toString());
            run(dir, "ld", "-m", "elf_x86_64", "-Ttext=0x" + Long.toHexString(origin), "-e", "0x" + Long.toHexString(origin),
                    "--no-warn-rwx-segments", "-o", e.toString(), o.toString());
            run(dir, "objcopy", "-O", "binary", "-j", ".text", e.toString(), b.toString());
            return Files.readAllBytes(b);
        } catch (IOException ex) {
            throw new IllegalStateException("x86 assembly failed: " + ex.getMessage(), ex);
        } finally {
            deleteTree(dir);
        }
    }

    /** Assembles arm64 source at {@code origin} (origin only matters for PC-relative forms). */
    public static byte[] arm64(String source, long origin) {
        try (Keystone ks = new Keystone(KeystoneArchitecture.Arm64, KeystoneMode.LittleEndian)) {
            KeystoneEncoded enc = ks.assemble(source, (int) origin);
            return enc.getMachineCode();
        }
    }

    private static void run(Path dir, String... cmd) throws IOException {
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        try {
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IOException(String.join(" ", cmd) + ": " + out.trim());
            }
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted");
        }
    }

    private static void deleteTree(Path dir) {
        if (dir == null) return;
        try (Stream<Path> w = Files.walk(dir)) {
            w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // temp files only
        }
    }
}
