package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalLong;
import java.util.function.LongFunction;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * Symbols kept by {@link SymbolTableCache} are the ones decoded from the kernel file (which
 * {@code KallsymsReferenceTest} checks against the guest's own /proc/kallsyms), on Debian's kernel of each
 * arch: a later read with the same key comes from the kept file (shown by a decoder that fails),
 * another build's file or a damaged one is decoded again (and replaced).
 */
@Tag("kernel")
class SymbolTableCacheTest {
    @TempDir Path dir;

    @ParameterizedTest
    @EnumSource(Arch.class)
    void keptSymbolsEqualTheDecodedOnesAndOnlyForTheirKey(Arch a) throws Exception {
        Path kernel = GuestImages.forRepository().kernel(a);
        Kallsyms.KernelText k = Kallsyms.load(kernel);
        SymbolTable decoded = a == Arch.ARM64 ? Kallsyms.fromArm64Image(k.bytes(), kernel.toString()) : k.symbols();
        assertTrue(decoded.symbols().size() > 50_000, "symbols: " + decoded.symbols().size());
        LongFunction<LongFunction<OptionalLong>> offsets = linkBase -> decoded::fileOffset;

        assertSame(decoded, SymbolTableCache.read("kernel-1", "build-1", dir, offsets, () -> decoded));
        List<Path> kept = files();
        assertEquals(1, kept.size(), kept.toString());

        SymbolTableCache.Decoder fails = () -> { throw new KernelImageException("decoded although kept"); };
        assertSame(decoded, SymbolTableCache.read("kernel-1", "build-1", dir, offsets, fails));

        assertSame(decoded, SymbolTableCache.read("kernel-2", "build-1", dir, offsets, () -> decoded));
        assertEquals(2, files().size());
        // another kpemu build: decoded again (a failing decoder shows it), the kernel's file replaced
        org.junit.jupiter.api.Assertions.assertThrows(KernelImageException.class,
                () -> SymbolTableCache.read("kernel-2", "build-2", dir, offsets, fails));
        assertSame(decoded, SymbolTableCache.read("kernel-2", "build-2", dir, offsets, () -> decoded));
        assertSame(decoded, SymbolTableCache.read("kernel-2", "build-2", dir, offsets, fails));
        assertEquals(2, files().size());

        Path f = kept.get(0);
        byte[] whole = Files.readAllBytes(f);
        Files.write(f, java.util.Arrays.copyOf(whole, whole.length / 2));
        assertSame(decoded, SymbolTableCache.read("kernel-1", "build-1", dir, offsets, () -> decoded));
        assertEquals(whole.length, Files.size(f));
    }

    private List<Path> files() throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> p.toString().endsWith(".symbols")).sorted().toList();
        }
    }

    private static void assertSame(SymbolTable want, SymbolTable got) {
        assertEquals(want.symbols(), got.symbols(), "symbols");
        assertEquals(want.linkBase(), got.linkBase(), "link base");
        assertEquals(want.source(), got.source(), "source");
        long text = want.byName("_stext").orElseThrow().address();
        assertEquals(want.fileOffset(text), got.fileOffset(text));
        assertEquals(want.isKsymAddress(text), got.isKsymAddress(text));
    }
}
