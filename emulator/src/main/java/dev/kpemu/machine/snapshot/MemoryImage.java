package dev.kpemu.machine.snapshot;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.MemoryRegion;

/**
 * Guest RAM in a snapshot, sparse: per RAM region its name, base and size, then only the pages
 * that hold anything but zeros (the rest of a machine's RAM was never written: a fresh engine's
 * RAM reads zero). Restoring writes the saved pages and zeroes every other page the restoring
 * machine holds data in: before its guest ever ran, the pages its host wrote (its own kernel
 * load, {@link GuestMemory#hostWrote}), without reading RAM, by handing them back to the host
 * ({@link GuestMemory#zeroUnrunPages}); after, every page that differs, found by reading it.
 */
final class MemoryImage {
    static final int PAGE = 4096;
    /** Bytes read from the engine at a time. */
    private static final int CHUNK = 1 << 20;
    private static final byte[] ZERO_PAGE = new byte[PAGE];

    private MemoryImage() {}

    static List<MemoryRegion> ramRegions(GuestMemory memory) {
        List<MemoryRegion> ram = new ArrayList<>();
        for (MemoryRegion r : memory.regions()) if (r.kind() == MemoryRegion.Kind.RAM) ram.add(r);
        return ram;
    }

    /** Writes every RAM region's non-zero pages; returns how many pages were written. */
    static long save(GuestMemory memory, DataOutput out) throws IOException {
        List<MemoryRegion> ram = ramRegions(memory);
        out.writeInt(ram.size());
        byte[] buf = new byte[CHUNK];
        long pages = 0;
        for (MemoryRegion r : ram) {
            out.writeUTF(r.name());
            out.writeLong(r.base());
            out.writeLong(r.size());
            for (long off = 0; off < r.size(); off += CHUNK) {
                int len = (int) Math.min(CHUNK, r.size() - off);
                memory.read(r.base() + off, buf, 0, len);
                for (int p = 0; p < len; p += PAGE) {
                    if (Arrays.mismatch(buf, p, p + PAGE, ZERO_PAGE, 0, PAGE) < 0) continue;
                    out.writeLong((off + p) / PAGE);
                    out.write(buf, p, PAGE);
                    pages++;
                }
            }
            out.writeLong(-1);
        }
        return pages;
    }

    /**
     * Reads what {@link #save} wrote into {@code memory}, whose RAM regions must be the same;
     * {@code guestRan}: the restoring machine's guest has executed (its RAM is compared page by
     * page), else only host-written pages can hold data.
     */
    static void restore(GuestMemory memory, DataInput in, boolean guestRan) throws IOException, SnapshotException {
        List<MemoryRegion> ram = ramRegions(memory);
        int n = in.readInt();
        if (n != ram.size()) throw otherMachine("the snapshot has " + n + " RAM regions, this machine " + ram.size());
        byte[] cur = new byte[CHUNK], want = new byte[CHUNK];
        for (MemoryRegion r : ram) {
            String name = in.readUTF();
            long base = in.readLong(), size = in.readLong();
            if (!name.equals(r.name()) || base != r.base() || size != r.size()) {
                throw otherMachine(String.format("the snapshot's RAM %s at 0x%x (%d MiB) is not this machine's %s at 0x%x (%d MiB)",
                        name, base, size >> 20, r.name(), r.base(), r.size() >> 20));
            }
            long next = in.readLong();
            long lastPage = -1;
            if (!guestRan) {
                BitSet restored = new BitSet();
                long pages = size / PAGE;
                // runs of consecutive pages go to the engine in one write of up to CHUNK bytes
                // (a write per page cost one FFM call and one engine lookup per page)
                long runStart = -1;
                int runBytes = 0;
                while (next != -1) {
                    if (next <= lastPage || next >= pages) throw new IOException("RAM pages out of order");
                    if (runBytes > 0 && (next != lastPage + 1 || runBytes == CHUNK)) {
                        memory.write(base + runStart * PAGE, want, 0, runBytes);
                        runBytes = 0;
                    }
                    if (runBytes == 0) runStart = next;
                    in.readFully(want, runBytes, PAGE);
                    runBytes += PAGE;
                    restored.set((int) next);
                    lastPage = next;
                    next = in.readLong();
                }
                if (runBytes > 0) memory.write(base + runStart * PAGE, want, 0, runBytes);
                // pages the host wrote (its own kernel load) that are zero in the snapshot: handed
                // back to the host in runs (they held ~23 MiB of a restored x86_64 session's peak)
                long zeroFrom = -1;
                for (long p = 0; p <= pages; p++) {
                    boolean zero = p < pages && !restored.get((int) p) && memory.hostWrote(base + p * PAGE);
                    if (zero && zeroFrom < 0) zeroFrom = p;
                    if (!zero && zeroFrom >= 0) {
                        memory.zeroUnrunPages(base + zeroFrom * PAGE, (p - zeroFrom) * PAGE);
                        zeroFrom = -1;
                    }
                }
                continue;
            }
            for (long off = 0; off < size; off += CHUNK) {
                int len = (int) Math.min(CHUNK, size - off);
                memory.read(base + off, cur, 0, len);
                Arrays.fill(want, 0, len, (byte) 0);
                long firstPage = off / PAGE, endPage = (off + len) / PAGE;
                while (next != -1 && next < endPage) {
                    if (next <= lastPage || next < firstPage) throw new IOException("RAM pages out of order");
                    in.readFully(want, (int) ((next - firstPage) * PAGE), PAGE);
                    lastPage = next;
                    next = in.readLong();
                }
                for (int p = 0; p < len; p += PAGE) {
                    if (Arrays.mismatch(cur, p, p + PAGE, want, p, p + PAGE) >= 0) memory.write(base + off + p, want, p, PAGE);
                }
            }
            if (next != -1) throw new IOException("RAM page beyond the region");
        }
    }

    private static SnapshotException otherMachine(String why) {
        return new SnapshotException(SnapshotException.Kind.OTHER_MACHINE, why);
    }
}
