package dev.kpemu.image;

import java.nio.file.Path;
import java.util.LinkedHashMap;

import dev.kpemu.machine.Arch;

/**
 * The kernel text tables this JVM has read ({@link KernelTextTablesCache}), kept in memory by arch,
 * kernel digest, kpemu build and cache folder, the last used last, at most a few kernels' worth:
 * the rows of an exploration ({@code kpemu faults} boots one machine a row) share one instead of
 * reading the cache file again (~20 ms CPU a row). {@link KernelTextTables} is not changed after
 * it is read, and the symbol table it is read with is, for the same key, the one
 * {@link KernelSymbolsInMemory} keeps, so parallel runs may share it.
 */
public final class KernelTextTablesInMemory {
    private static final int KEPT = 4;
    private static final LinkedHashMap<String, KernelTextTables> TABLES = new LinkedHashMap<>(8, 0.75f, true);

    private KernelTextTablesInMemory() {}

    /** As {@link KernelTextTablesCache#read}, from memory when this JVM has read the same tables; a null key part: not kept. */
    public static KernelTextTables read(Arch arch, SymbolTable syms, OnDemandFileBytes file, String kernelDigest, String build, Path dir) {
        if (dir == null || kernelDigest == null || build == null) return KernelTextTablesCache.read(arch, syms, file, kernelDigest, build, dir);
        String key = arch + "\n" + kernelDigest + "\n" + build + "\n" + dir.toAbsolutePath();
        synchronized (TABLES) {
            KernelTextTables t = TABLES.get(key);
            if (t != null) return t;
        }
        KernelTextTables t = KernelTextTablesCache.read(arch, syms, file, kernelDigest, build, dir);
        synchronized (TABLES) {
            TABLES.put(key, t);
            if (TABLES.size() > KEPT) TABLES.remove(TABLES.keySet().iterator().next());
        }
        return t;
    }
}
