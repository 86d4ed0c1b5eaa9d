package dev.kpemu.natives;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NativeLibraries#clockStale}: a checkout's hook library is built again when one of its C
 * sources or headers is newer than it (the fetch script's rule), not otherwise.
 */
class ClockStalenessTest {
    @Test
    void aSourceOrHeaderNewerThanTheLibraryMakesItStale(@TempDir Path root) throws Exception {
        Path src = Files.createDirectories(root.resolve(NativeLibraries.CLOCK_SOURCES));
        Path lib = Files.createDirectories(root.resolve(".cache/natives/lib"));
        Path c = Files.writeString(src.resolve("kpemu_clock.c"), "int x;\n");
        Path h = Files.writeString(src.resolve("kpemu_probe_hits.h"), "#define X 1\n");
        Path notes = Files.writeString(src.resolve("README"), "notes\n");
        Path built = Files.writeString(lib.resolve(NativeLibraries.CLOCK), "ELF");
        FileTime t = FileTime.fromMillis(1_700_000_000_000L);
        for (Path p : new Path[] {c, h, notes}) Files.setLastModifiedTime(p, t);
        Files.setLastModifiedTime(built, FileTime.fromMillis(t.toMillis() + 1000));
        assertFalse(NativeLibraries.clockStale(root, lib), "built after its sources");

        Files.setLastModifiedTime(h, FileTime.fromMillis(t.toMillis() + 2000));
        assertTrue(NativeLibraries.clockStale(root, lib), "a header changed after the build");
        Files.setLastModifiedTime(h, t);
        Files.setLastModifiedTime(c, FileTime.fromMillis(t.toMillis() + 2000));
        assertTrue(NativeLibraries.clockStale(root, lib), "a source changed after the build");
        Files.setLastModifiedTime(c, t);
        Files.setLastModifiedTime(notes, FileTime.fromMillis(t.toMillis() + 2000));
        assertFalse(NativeLibraries.clockStale(root, lib), "a file that is not C changed: nothing to build");
    }

    @Test
    void withoutTheSourcesNothingIsStale(@TempDir Path root) throws Exception {
        Path lib = Files.createDirectories(root.resolve("lib"));
        Files.writeString(lib.resolve(NativeLibraries.CLOCK), "ELF");
        assertFalse(NativeLibraries.clockStale(root, lib), "no C sources beside the jars' checkout: the library is used as it is");
    }
}
