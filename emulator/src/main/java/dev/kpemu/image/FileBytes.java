package dev.kpemu.image;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A whole file read into a byte array in chunks of {@value #CHUNK} bytes. {@code Files.readAllBytes}
 * reads a file in one call, for which the JDK copies through a temporary direct buffer as large as
 * the file and keeps it for the thread's life (its cache of temporary buffers has no size limit
 * unless {@code jdk.nio.maxCachedBufferSize} is set): a 57 MiB vmlinux stayed resident twice, in
 * the heap and in that buffer (NMT's "Other", 66 MiB on an x86-64 boot). Chunked reads keep that
 * buffer at one chunk.
 */
public final class FileBytes {
    static final int CHUNK = 1 << 20;

    private FileBytes() {}

    /** The file's bytes. */
    public static byte[] read(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size > Integer.MAX_VALUE - 8) throw new IOException(file + " is too large (" + size + " bytes)");
            byte[] data = new byte[(int) size];
            int off = 0;
            while (off < data.length) {
                int n = ch.read(ByteBuffer.wrap(data, off, Math.min(CHUNK, data.length - off)));
                if (n < 0) throw new EOFException(file + " shrank while it was read");
                off += n;
            }
            return data;
        }
    }

    /** Takes a file's bytes piece by piece: {@code data[from, from + n)} holds the file's bytes at {@code fileOffset}. */
    @FunctionalInterface
    public interface ChunkSink {
        void accept(long fileOffset, byte[] data, int from, int n);
    }

    /** Hands {@code length} bytes of {@code file} (open as {@code ch}) from {@code offset} to {@code sink} in chunks of at most {@value #CHUNK} bytes. */
    public static void forEachChunk(FileChannel ch, Path file, long offset, long length, ChunkSink sink) throws IOException {
        byte[] buf = new byte[(int) Math.min(CHUNK, Math.max(1, length))];
        long done = 0;
        while (done < length) {
            int want = (int) Math.min(buf.length, length - done);
            readFully(ch, file, buf, 0, want, offset + done);
            sink.accept(offset + done, buf, 0, want);
            done += want;
        }
    }

    /** Fills {@code buf[from, from + n)} with the file's bytes at {@code position}. */
    static void readFully(FileChannel ch, Path file, byte[] buf, int from, int n, long position) throws IOException {
        for (int got = 0; got < n; ) {
            int r = ch.read(ByteBuffer.wrap(buf, from + got, n - got), position + got);
            if (r < 0) throw new EOFException(file + " ends before byte " + (position + n));
            got += r;
        }
    }
}
