package dev.kpemu.image;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import dev.kpemu.machine.Arch;

/**
 * {@link KernelTextTables} kept between runs in a folder, one file per kernel and kpemu build:
 * reading them from the kernel file is most of a snapshot-started session's preparation on arm64
 * (the Image's relocations, then the tables found by their shape: ~0.4 s of CPU on Debian 12's
 * 6.1), and they depend only on the kernel file and kpemu's code. The caller names both (the
 * kernel file's SHA-256 and kpemu's build); the file is named by the kernel's digest and holds
 * both, so a file of another build is never read and is replaced: at most one file per kernel
 * file. A missing, unreadable or damaged file means reading the kernel again (and writing the
 * file anew).
 */
public final class KernelTextTablesCache {
    private static final String MAGIC = "kpemu kernel text tables 3";

    private KernelTextTablesCache() {}

    /**
     * The tables of the kernel of {@code syms} and {@code file}, from {@code dir} when a file there
     * holds them for {@code kernelDigest} and {@code build}, else read from the kernel (and kept in
     * {@code dir}). A null {@code dir}, {@code kernelDigest} or {@code build}: always read from the kernel.
     */
    public static KernelTextTables read(Arch arch, SymbolTable syms, byte[] file, String kernelDigest, String build, Path dir) {
        return read(arch, syms, OnDemandFileBytes.inMemory(file, "kernel file"), kernelDigest, build, dir);
    }

    /** As above; the file is read whole only when the tables are read from it. */
    public static KernelTextTables read(Arch arch, SymbolTable syms, OnDemandFileBytes file, String kernelDigest, String build, Path dir) {
        if (dir == null || kernelDigest == null || build == null) return KernelTextTables.read(arch, syms, file);
        String key = kernelDigest + " " + build;
        Path kept = dir.resolve(FileDigests.sha256Hex((arch.name() + "\n" + kernelDigest).getBytes(StandardCharsets.UTF_8)) + ".text-tables");
        try (InputStream raw = Files.newInputStream(kept);
             DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
            if (in.readUTF().equals(MAGIC) && in.readUTF().equals(key)) return KernelTextTables.readFrom(in, arch, syms, file);
        } catch (IOException e) {
            // not kept yet, or damaged: read the kernel
        }
        KernelTextTables t = KernelTextTables.read(arch, syms, file);
        KeptFile.write(kept, MAGIC, key, t::writeTo);
        return t;
    }
}
