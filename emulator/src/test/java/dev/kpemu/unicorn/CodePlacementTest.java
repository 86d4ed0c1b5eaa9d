package dev.kpemu.unicorn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Engines' translation buffers lie within a direct call ({@code call rel32}) of libunicorn's and
 * kpemu's native code, checked against the process's own memory map: the buffer is the executable
 * anonymous mapping an engine's opening adds, the libraries' code their executable mappings.
 */
class CodePlacementTest {
    private static final long REACH = 1L << 31;

    private record Mapping(long start, long end, String perms, String name) {}

    private static List<Mapping> maps() throws IOException {
        List<Mapping> out = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            String[] f = line.trim().split("\\s+", 6);
            String[] range = f[0].split("-");
            out.add(new Mapping(Long.parseUnsignedLong(range[0], 16), Long.parseUnsignedLong(range[1], 16), f[1], f.length > 5 ? f[5] : ""));
        }
        return out;
    }

    private static List<Mapping> text(List<Mapping> maps, String library) {
        return maps.stream().filter(m -> m.perms().contains("x") && m.name().endsWith("/" + library)).toList();
    }

    /** The executable anonymous mappings of at least half a buffer in {@code after} that {@code before} did not have (not the JIT's). */
    private static List<Mapping> added(List<Mapping> before, List<Mapping> after) {
        Set<Long> old = new HashSet<>();
        for (Mapping m : before) if (m.perms().contains("x")) old.add(m.start());
        return after.stream().filter(m -> m.perms().contains("x") && m.name().isEmpty() && !old.contains(m.start())
                && m.end() - m.start() >= CodePlacement.BUFFER_BYTES / 2).toList();
    }

    private static void assertInReach(Mapping buffer, List<Mapping> code, String what) {
        assertFalse(code.isEmpty(), what + " is not mapped");
        for (Mapping t : code) {
            long far = Math.max(Math.abs(t.end() - buffer.start()), Math.abs(buffer.end() - t.start()));
            assertTrue(far < REACH, String.format("%s at %x-%x is %d MiB from the buffer at %x-%x", what, t.start(), t.end(), far >> 20, buffer.start(), buffer.end()));
        }
    }

    /** The block hook's entry (kpemu's library may be anywhere) lies within a direct call of the buffer (x86-64 hosts make one). */
    private static void assertEntryInReach(Unicorn uc, Mapping buffer) {
        if (!"amd64".equals(System.getProperty("os.arch"))) return;
        java.lang.foreign.MemorySegment hook = dev.kpemu.natives.NativeLibraries.load(dev.kpemu.natives.NativeLibraries.CLOCK)
                .find("kpemu_clock_block").orElseThrow();
        long entry = CodePlacement.entry(uc.codeRange(), hook).address();
        long far = Math.max(Math.abs(entry - buffer.start()), Math.abs(buffer.end() - entry));
        assertTrue(far < REACH, String.format("the block hook's entry %x is %d MiB from the buffer", entry, far >> 20));
    }

    @Test
    void everyEngineOpenedInTurnGetsItsBufferNearTheNativeCode() throws IOException {
        for (int round = 0; round < 2 * CodePlacement.CHUNKS; round++) {
            int arch = round % 2 == 0 ? Unicorn.ARCH_X86 : Unicorn.ARCH_ARM64;
            int mode = round % 2 == 0 ? Unicorn.MODE_64 : Unicorn.MODE_ARM;
            List<Mapping> before = maps();
            try (Unicorn uc = Unicorn.open(arch, mode)) {
                List<Mapping> after = maps();
                List<Mapping> buffers = added(before, after);
                assertEquals(1, buffers.size(), "round " + round + ": one new executable mapping, the engine's buffer: " + buffers);
                Mapping buffer = buffers.get(0);
                assertTrue(buffer.end() - buffer.start() <= CodePlacement.BUFFER_BYTES, "buffer of " + (buffer.end() - buffer.start()) + " bytes");
                assertTrue(uc.codePlaced(), "round " + round + ": " + Unicorn.codePlacement());
                assertInReach(buffer, text(after, "libunicorn.so.2"), "libunicorn's code");
                assertEntryInReach(uc, buffer);
            }
        }
    }

    @Test
    void severalEnginesAtOnceEachGetTheirOwnRange() throws IOException {
        List<Unicorn> open = new ArrayList<>();
        try {
            List<Mapping> before = maps();
            for (int i = 0; i < 4; i++) open.add(Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64));
            List<Mapping> after = maps();
            List<Mapping> buffers = added(before, after);
            assertEquals(4, buffers.size(), "four buffers: " + buffers);
            for (Unicorn uc : open) assertTrue(uc.codePlaced(), Unicorn.codePlacement());
            for (Mapping b : buffers) {
                assertInReach(b, text(after, "libunicorn.so.2"), "libunicorn's code");

            }
        } finally {
            for (Unicorn uc : open) uc.close();
        }
    }
}
