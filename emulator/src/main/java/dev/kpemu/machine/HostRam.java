package dev.kpemu.machine;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Host memory backing guest RAM: an anonymous private mapping of the host ({@code mmap}), zero
 * and untouched until the guest or the host writes a page (a 256 MiB guest costs only the pages
 * it uses), released with {@link #close}. The engine maps it ({@code uc_mem_map_ptr}), so the host
 * reads guest RAM in place, without a call into the engine: page-table walks and a probe's
 * fetches are plain loads.
 */
final class HostRam implements AutoCloseable {
    private static final int PROT_READ = 1, PROT_WRITE = 2;
    private static final int MAP_PRIVATE = 0x02, MAP_ANONYMOUS = 0x20, MAP_NORESERVE = 0x4000;
    private static final int MADV_DONTNEED = 4;
    private static final MethodHandle MMAP, MUNMAP, MADVISE;

    static {
        Linker linker = Linker.nativeLinker();
        var libc = linker.defaultLookup();
        MMAP = linker.downcallHandle(libc.find("mmap").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
        MUNMAP = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        MADVISE = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    }

    private final MemorySegment segment;
    private boolean closed;

    private HostRam(MemorySegment segment) { this.segment = segment; }

    /** {@code size} bytes of zeroed host memory (page-aligned). */
    static HostRam allocate(long size) {
        MemorySegment at;
        try {
            at = (MemorySegment) MMAP.invokeExact(MemorySegment.NULL, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("mmap of " + size + " bytes: " + t, t);
        }
        if (at.address() == -1L || at.address() == 0) throw new IllegalStateException("cannot reserve " + (size >> 20) + " MiB of host memory for guest RAM (mmap failed)");
        return new HostRam(at.reinterpret(size));
    }

    /** The whole mapping. */
    MemorySegment segment() { return segment; }

    /**
     * Gives whole pages back to the host's kernel ({@code madvise(MADV_DONTNEED)} on this private
     * anonymous mapping): they read zero afterwards and hold no memory until written again.
     * {@code offset} and {@code len}: page-aligned, inside the mapping.
     */
    void discard(long offset, long len) {
        if ((offset & 0xfff) != 0 || (len & 0xfff) != 0 || offset < 0 || len < 0 || offset + len > segment.byteSize()) {
            throw new IllegalArgumentException("not whole pages of this RAM: +0x" + Long.toHexString(offset) + ", 0x" + Long.toHexString(len));
        }
        if (len == 0) return;
        int r;
        try {
            r = (int) MADVISE.invokeExact(segment.asSlice(offset, len), len, MADV_DONTNEED);
        } catch (Throwable t) {
            throw new IllegalStateException("madvise of guest RAM: " + t, t);
        }
        if (r != 0) segment.asSlice(offset, len).fill((byte) 0);   // not discarded: zero it in place
    }

    /** Unmaps the memory: only after the engine that mapped it is closed. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        try {
            int r = (int) MUNMAP.invokeExact(segment, segment.byteSize());
            if (r != 0) throw new IllegalStateException("munmap of guest RAM failed");
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("munmap of guest RAM: " + t, t);
        }
    }
}
