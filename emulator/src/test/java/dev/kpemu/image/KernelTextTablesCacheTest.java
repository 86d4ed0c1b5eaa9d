package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * Tables kept by {@link KernelTextTablesCache} are the tables read from the kernel file (which
 * {@link KernelTextTablesTest} checks against Linux's own lists), on Debian's kernel of each arch;
 * a later read with the same key comes from the kept file (shown by handing it no kernel bytes to
 * read), another build's file or a damaged one is read from the kernel again (and replaced).
 */
@Tag("kernel")
class KernelTextTablesCacheTest {
    @TempDir Path dir;

    @ParameterizedTest
    @EnumSource(Arch.class)
    void keptTablesEqualTheKernelsAndOnlyForTheirKey(Arch a) throws Exception {
        Kallsyms.KernelText k = Kallsyms.load(GuestImages.forRepository().kernel(a));
        KernelTextTables fromKernel = KernelTextTables.read(a, k.symbols(), k.bytes());
        assertTrue(fromKernel.ftraceSites().size() > 10_000, "ftrace sites: " + fromKernel.ftraceSites().size());

        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), k.bytes(), "kernel-1", "build-1", dir));
        List<Path> kept = files();
        assertEquals(1, kept.size(), kept.toString());

        // the same key: from the file (empty kernel bytes would give no tables, or fail, if read)
        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), new byte[0], "kernel-1", "build-1", dir));

        // another kernel file: a file of its own
        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), k.bytes(), "kernel-2", "build-1", dir));
        assertEquals(2, files().size());
        // another kpemu build: that kernel's file is not read but replaced
        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), k.bytes(), "kernel-2", "build-2", dir));
        assertEquals(2, files().size());
        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), new byte[0], "kernel-2", "build-2", dir));

        // a damaged file: the kernel is read again, and the file written anew
        Path f = kept.get(0);
        byte[] whole = Files.readAllBytes(f);
        Files.write(f, java.util.Arrays.copyOf(whole, whole.length / 2));
        assertSame(fromKernel, KernelTextTablesCache.read(a, k.symbols(), k.bytes(), "kernel-1", "build-1", dir));
        assertEquals(whole.length, Files.size(f));
    }

    private List<Path> files() throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> p.toString().endsWith(".text-tables")).sorted().toList();
        }
    }

    private static void assertSame(KernelTextTables want, KernelTextTables got) {
        assertEquals(want.arch(), got.arch());
        assertEquals(List.copyOf(want.ftraceSites()), List.copyOf(got.ftraceSites()), "ftrace sites");
        assertEquals(want.kprobeBlacklist(), got.kprobeBlacklist(), "blacklist");
        assertEquals(List.copyOf(want.exceptionTable()), List.copyOf(got.exceptionTable()), "exception table");
        assertEquals(List.copyOf(want.bugSites()), List.copyOf(got.bugSites()), "bug sites");
        assertEquals(want.jumpLabels(), got.jumpLabels(), "jump labels");
        assertEquals(want.staticCalls(), got.staticCalls(), "static calls");
        assertEquals(want.bootPatchedSites(), got.bootPatchedSites(), "boot-patched sites");
        assertEquals(want.notes(), got.notes(), "notes");
    }
}
