package dev.kpemu.image;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Guest addresses found by scanning a kernel's text (the instructions after which the machine
 * resynchronises the guest's debug registers: x86's {@code mov %reg, %drN}, arm64's {@code msr
 * DBGW*}), kept between runs in a folder as {@link KernelTextTablesCache} keeps the text tables:
 * they depend only on the kernel file, on what was scanned ({@code kind}, which names the arch
 * and the scanned range) and on kpemu's code. A scan of the whole text took every boot 20-30 ms of
 * CPU. A missing, unreadable, damaged or other build's file means scanning again (and writing the
 * file anew).
 */
public final class KernelSitesCache {
    private static final String MAGIC = "kpemu kernel sites 1";
    /** More sites than any kernel's text holds: a count above it is a damaged file. */
    private static final int MAX_SITES = 1 << 22;

    private KernelSitesCache() {}

    /** A scan of the kernel's text. */
    @FunctionalInterface
    public interface Scan<E extends Exception> {
        List<Long> sites() throws E;
    }

    /**
     * The sites {@code scan} finds, from {@code dir} when a file there holds them for {@code kind},
     * {@code kernelDigest} and {@code build}, else scanned (and kept in {@code dir}). A null
     * {@code dir}, {@code kernelDigest} or {@code build}: always scanned.
     */
    public static <E extends Exception> List<Long> read(String kind, String kernelDigest, String build, Path dir, Scan<E> scan) throws E {
        if (dir == null || kernelDigest == null || build == null) return List.copyOf(scan.sites());
        String key = kind + "\n" + kernelDigest + "\n" + build;
        Path kept = dir.resolve(FileDigests.sha256Hex((kind + "\n" + kernelDigest).getBytes(StandardCharsets.UTF_8)) + ".sites");
        try (InputStream raw = Files.newInputStream(kept);
             DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
            if (in.readUTF().equals(MAGIC) && in.readUTF().equals(key)) {
                int n = in.readInt();
                if (n < 0 || n > MAX_SITES) throw new IOException("damaged");
                List<Long> sites = new ArrayList<>(n);
                for (int i = 0; i < n; i++) sites.add(in.readLong());
                if (in.read() != -1) throw new IOException("damaged");
                return List.copyOf(sites);
            }
        } catch (IOException e) {
            // not kept yet, or damaged: scan
        }
        List<Long> sites = List.copyOf(scan.sites());
        KeptFile.write(kept, MAGIC, key, out -> {
            out.writeInt(sites.size());
            for (long s : sites) out.writeLong(s);
        });
        return sites;
    }
}
