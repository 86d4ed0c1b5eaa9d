package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import java.util.function.LongFunction;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.machine.Arch;

/**
 * On Debian's x86-64 kernel: a second read of the same kernel, build and folder is the table the
 * first read gave, without the folder's file (deleted) or a decoder (one that fails); another
 * folder or build is read there (the failing decoder shows it).
 */
@Tag("kernel")
class KernelSymbolsInMemoryTest {
    @TempDir Path dir;
    @TempDir Path other;

    @Test
    void aSecondReadOfTheSameKeyIsTheFirstReadsTable() throws Exception {
        Path kernel = GuestImages.forRepository().kernel(Arch.X86_64);
        SymbolTable decoded = Kallsyms.load(kernel).symbols();
        LongFunction<LongFunction<OptionalLong>> offsets = linkBase -> decoded::fileOffset;
        String digest = "in-memory-test " + System.nanoTime();
        SymbolTable first = KernelSymbolsInMemory.read(digest, "build-1", dir, offsets, () -> decoded);
        assertSame(decoded, first);
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) Files.delete(p);
        }
        SymbolTableCache.Decoder fails = () -> { throw new KernelImageException("decoded although in memory"); };
        assertSame(first, KernelSymbolsInMemory.read(digest, "build-1", dir, offsets, fails));
        assertThrows(KernelImageException.class, () -> KernelSymbolsInMemory.read(digest, "build-1", other, offsets, fails));
        assertThrows(KernelImageException.class, () -> KernelSymbolsInMemory.read(digest, "build-2", dir, offsets, fails));
        assertEquals(decoded.symbols().size(), first.symbols().size());
    }
}
