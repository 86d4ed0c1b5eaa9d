package dev.kpemu.image;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A kernel file's bytes, read whole only when something asks for all of them. Loading a kernel
 * needs each byte once, on its way into guest RAM ({@link #copyRange}, in chunks); a boot without
 * probes needs nothing more, so the file never sits on the heap (a 57 MiB x86-64 vmlinux was a
 * fifth of such a boot's peak memory). Probes' checks and tables read it whole ({@link #bytes}).
 * Bytes already in memory (a decompressed payload) are held as they are.
 */
public final class OnDemandFileBytes {
    private final Path file;
    private final String name;
    private final long length;
    private volatile byte[] bytes;
    /** Opened by the first range read and kept: a probe session's checks read a few bytes per probe. */
    private FileChannel channel;

    private OnDemandFileBytes(Path file, String name, long length, byte[] bytes) {
        this.file = file;
        this.name = name;
        this.length = length;
        this.bytes = bytes;
    }

    /** {@code file}, of {@code length} bytes, not read yet. */
    public static OnDemandFileBytes of(Path file, long length) {
        return new OnDemandFileBytes(file, file.toString(), length, null);
    }

    /** Bytes already in memory. */
    public static OnDemandFileBytes inMemory(byte[] bytes, String name) {
        return new OnDemandFileBytes(null, name, bytes.length, bytes);
    }

    public long length() { return length; }

    /** Whether the whole file is in memory. */
    public boolean loaded() { return bytes != null; }

    /** All the bytes (read on the first call; throws UncheckedIOException when the file cannot be read or changed size). */
    public byte[] bytes() {
        byte[] d = bytes;
        if (d == null) {
            synchronized (this) {
                if ((d = bytes) == null) {
                    try {
                        d = FileBytes.read(file);
                    } catch (IOException e) {
                        throw new UncheckedIOException(name + ": cannot read: " + e.getMessage(), e);
                    }
                    if (d.length != length) {
                        throw new UncheckedIOException(new IOException(name + " changed while kpemu used it: " + length + " bytes, now " + d.length));
                    }
                    bytes = d;
                }
            }
        }
        return d;
    }

    /** Hands {@code n} bytes from {@code offset} to {@code sink}, in chunks, without reading the rest of the file. */
    public void copyRange(long offset, long n, FileBytes.ChunkSink sink) throws KernelImageException {
        if (offset < 0 || n < 0 || offset + n > length) {
            throw new KernelImageException(name + ": range 0x" + Long.toHexString(offset) + "+0x" + Long.toHexString(n) + " is outside the file");
        }
        byte[] d = bytes;
        if (d != null) {
            sink.accept(offset, d, (int) offset, (int) n);
            return;
        }
        try {
            FileBytes.forEachChunk(channel(), file, offset, n, sink);
        } catch (IOException e) {
            throw new KernelImageException(name + ": cannot read: " + e.getMessage(), e);
        }
    }

    private synchronized FileChannel channel() throws IOException {
        if (channel == null) channel = FileChannel.open(file, StandardOpenOption.READ);
        return channel;
    }

    /** The first {@code n} bytes (fewer when the file is shorter), without reading the rest. */
    public byte[] head(int n) throws KernelImageException {
        byte[] out = new byte[(int) Math.min(n, length)];
        copyRange(0, out.length, (at, chunk, from, len) -> System.arraycopy(chunk, from, out, (int) at, len));
        return out;
    }

    /** {@code n} bytes from {@code offset} (the range must lie in the file), without reading the rest. */
    public byte[] read(long offset, int n) {
        if (offset < 0 || n < 0 || offset + n > length) throw new IndexOutOfBoundsException(name + ": range 0x" + Long.toHexString(offset) + "+0x" + Long.toHexString(n) + " is outside the file");
        byte[] out = new byte[n];
        byte[] d = bytes;
        if (d != null) {
            System.arraycopy(d, (int) offset, out, 0, n);
            return out;
        }
        try {
            FileBytes.readFully(channel(), file, out, 0, n, offset);
        } catch (IOException e) {
            throw new UncheckedIOException(name + ": cannot read: " + e.getMessage(), e);
        }
        return out;
    }

    /** Looks at a window of the file; returns true to stop the scan. */
    @FunctionalInterface
    public interface WindowScanner {
        /**
         * {@code window[0, len)} holds the file's bytes from file offset {@code windowOffset}; the
         * positions to look at are {@code [from, to)}, each followed in the window by at least the
         * scan's {@code lookahead} bytes unless the file ends first.
         */
        boolean scan(long windowOffset, byte[] window, int from, int to, int len);
    }

    /**
     * Offers every position of the file once to {@code scanner}, in windows that carry
     * {@code lookahead} bytes past the positions they offer, without keeping the file: a search
     * (a banner, a note, a BTF header) over a file nothing else needs whole.
     */
    public void scan(int lookahead, WindowScanner scanner) {
        byte[] d = bytes;
        if (d != null) {
            scanner.scan(0, d, 0, d.length, d.length);
            return;
        }
        byte[] window = new byte[FileBytes.CHUNK + lookahead];
        long[] windowAt = {0};
        int[] filled = {0}, offered = {0};
        boolean[] stopped = {false};
        try {
            copyRange(0, length, (at, chunk, from, n) -> {
                if (stopped[0]) return;
                if (filled[0] + n > window.length) {          // drop what was offered; keep the rest as the new start
                    int keep = filled[0] - offered[0];
                    System.arraycopy(window, offered[0], window, 0, keep);
                    windowAt[0] += offered[0];
                    filled[0] = keep;
                    offered[0] = 0;
                }
                System.arraycopy(chunk, from, window, filled[0], n);
                filled[0] += n;
                int to = at + n == length ? filled[0] : filled[0] - lookahead;
                if (to > offered[0]) {
                    stopped[0] = scanner.scan(windowAt[0], window, offered[0], to, filled[0]);
                    offered[0] = to;
                }
            });
        } catch (KernelImageException e) {
            throw new UncheckedIOException(new IOException(e.getMessage(), e));
        }
    }
}
