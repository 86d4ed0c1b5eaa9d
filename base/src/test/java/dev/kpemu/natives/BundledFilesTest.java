package dev.kpemu.natives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The native engines kpemu-base's jar carries, unpacked into a cache as a program without a checkout does. */
class BundledFilesTest {
    @Test
    void theBuildCarriesTheHostsEnginesWithTheirHashesAndTheyUnpackOnce(@TempDir Path tmp) throws Exception {
        Map<String, String> sums = NativeLibraries.bundledManifest();
        assertNotNull(sums, "kpemu-base's build put no " + NativeLibraries.BUNDLED + "SHA256SUMS on the class path");
        List<String> notices = new ArrayList<>();
        Path dir = BundledFiles.unpack(NativeLibraries.BUNDLED, sums, tmp.resolve("natives/bundled"), Set.of(), notices::add);
        for (String name : List.of(NativeLibraries.UNICORN, NativeLibraries.CAPSTONE, NativeLibraries.CLOCK)) {
            // the unpacked file is the one the fetch script left, byte for byte
            assertArrayEquals(Files.readAllBytes(NativeLibraries.directory().resolve(name)), Files.readAllBytes(dir.resolve(name)), name);
        }
        assertEquals(1, notices.size(), notices.toString());
        long before = Files.getLastModifiedTime(dir.resolve(NativeLibraries.UNICORN)).toMillis();
        BundledFiles.unpack(NativeLibraries.BUNDLED, sums, dir, Set.of(), notices::add);
        assertEquals(1, notices.size(), "a complete directory is not written again");
        assertEquals(before, Files.getLastModifiedTime(dir.resolve(NativeLibraries.UNICORN)).toMillis());
    }

    @Test
    void aFileWhoseHashDiffersFromTheBuildsIsRefusedAndNothingIsLeft(@TempDir Path tmp) {
        Map<String, String> sums = new LinkedHashMap<>(NativeLibraries.bundledManifest());
        sums.put(NativeLibraries.CLOCK, "0".repeat(64));
        Path target = tmp.resolve("natives/bundled");
        var e = assertThrows(NativeLibraries.NativeLibraryException.class,
                () -> BundledFiles.unpack(NativeLibraries.BUNDLED, sums, target, Set.of(), line -> { }));
        assertTrue(e.getMessage().contains(NativeLibraries.CLOCK) && e.getMessage().contains("corrupt"), e.getMessage());
        assertFalse(Files.exists(target));
        assertEquals(0, tmp.resolve("natives").toFile().list().length, "no half-written directory beside it");
    }
}
