package dev.kpemu.image;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.OptionalLong;
import java.util.function.LongFunction;

/**
 * The kernel symbol tables this JVM has read ({@link SymbolTableCache}), kept in memory by kernel
 * digest, kpemu build and cache folder, the last used last, at most a few kernels' worth: every
 * run of an exploration ({@code kpemu faults} boots one machine a row) or of a session on the same
 * kernel shares one table instead of reading the cache file again (0.1–0.25 s a run). A
 * {@link SymbolTable} is immutable and its file-offset map a pure function of the kernel file's
 * layout, so parallel runs may share it.
 */
public final class KernelSymbolsInMemory {
    private static final int KEPT = 4;
    private static final LinkedHashMap<String, SymbolTable> TABLES = new LinkedHashMap<>(8, 0.75f, true);

    private KernelSymbolsInMemory() {}

    /** As {@link SymbolTableCache#read}, from memory when this JVM has read the same table; a null key part: not kept. */
    public static SymbolTable read(String kernelDigest, String build, Path dir, LongFunction<LongFunction<OptionalLong>> fileOffsets,
                                   SymbolTableCache.Decoder decoder) throws KernelImageException {
        if (dir == null || kernelDigest == null || build == null) return SymbolTableCache.read(kernelDigest, build, dir, fileOffsets, decoder);
        String key = kernelDigest + "\n" + build + "\n" + dir.toAbsolutePath();
        synchronized (TABLES) {
            SymbolTable t = TABLES.get(key);
            if (t != null) return t;
        }
        SymbolTable t = SymbolTableCache.read(kernelDigest, build, dir, fileOffsets, decoder);
        synchronized (TABLES) {
            TABLES.put(key, t);
            if (TABLES.size() > KEPT) TABLES.remove(TABLES.keySet().iterator().next());
        }
        return t;
    }
}
