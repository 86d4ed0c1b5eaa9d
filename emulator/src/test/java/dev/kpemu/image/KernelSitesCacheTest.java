package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Sites kept between runs ({@link KernelSitesCache}): read back as scanned, scanned again whenever the file cannot be trusted. */
class KernelSitesCacheTest {
    private static final List<Long> SITES = List.of(0xffffffff81000010L, 0xffffffff81234567L, 0xffff800008010abcL);

    private final AtomicInteger scans = new AtomicInteger();

    private List<Long> scan() {
        scans.incrementAndGet();
        return SITES;
    }

    private List<Long> read(Path dir, String kind, String digest, String build) {
        return KernelSitesCache.read(kind, digest, build, dir, this::scan);
    }

    @Test
    void keptSitesAreTheScannedOnes(@TempDir Path dir) {
        assertEquals(SITES, read(dir, "k", "d1", "b1"));
        assertEquals(SITES, read(dir, "k", "d1", "b1"));
        assertEquals(1, scans.get(), "the second run reads the file");
        try (var files = Files.list(dir)) {
            assertEquals(1, files.count());
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void anotherBuildKernelOrKindScansAgain(@TempDir Path dir) {
        read(dir, "k", "d1", "b1");
        read(dir, "k", "d1", "b2");    // another build replaces the file
        assertEquals(2, scans.get());
        read(dir, "k", "d1", "b1");
        assertEquals(3, scans.get());
        read(dir, "k", "d2", "b1");
        read(dir, "other range", "d1", "b1");
        assertEquals(5, scans.get());
        read(dir, "k", "d2", "b1");
        assertEquals(5, scans.get(), "each kernel and kind has its own file");
    }

    @Test
    void aDamagedFileIsScannedAgain(@TempDir Path dir) throws IOException {
        read(dir, "k", "d1", "b1");
        Path kept;
        try (var files = Files.list(dir)) {
            kept = files.findFirst().orElseThrow();
        }
        byte[] whole = Files.readAllBytes(kept);
        Files.write(kept, java.util.Arrays.copyOf(whole, whole.length - 3));        // truncated
        assertEquals(SITES, read(dir, "k", "d1", "b1"));
        assertEquals(2, scans.get());
        byte[] longer = java.util.Arrays.copyOf(whole, whole.length + 8);           // trailing bytes
        Files.write(kept, longer);
        assertEquals(SITES, read(dir, "k", "d1", "b1"));
        assertEquals(3, scans.get());
        assertEquals(SITES, read(dir, "k", "d1", "b1"));
        assertEquals(3, scans.get(), "the rescan wrote a good file");
    }

    @Test
    void withoutAFolderOrAKeyItAlwaysScans(@TempDir Path dir) {
        read(null, "k", "d1", "b1");
        read(dir, "k", null, "b1");
        read(dir, "k", "d1", null);
        read(null, "k", "d1", "b1");
        assertEquals(4, scans.get());
    }

    @Test
    void aScansExceptionReachesTheCaller(@TempDir Path dir) {
        KernelImageException e = assertThrows(KernelImageException.class,
                () -> KernelSitesCache.read("k", "d1", "b1", dir, () -> { throw new KernelImageException("no .text"); }));
        assertEquals("no .text", e.getMessage());
    }
}
