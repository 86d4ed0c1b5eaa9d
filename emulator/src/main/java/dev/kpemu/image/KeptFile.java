package dev.kpemu.image;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/** A file kpemu keeps between runs (a cache of what it derives from a kernel file), written so a reader never sees half of it. */
final class KeptFile {
    private KeptFile() {}

    /** What goes into the file after its magic line and key. */
    @FunctionalInterface
    interface Body {
        void write(DataOutputStream out) throws IOException;
    }

    /**
     * Writes {@code magic}, {@code key} and {@code body} beside {@code kept} and moves the result
     * there; a failure leaves no file (the next run derives the data again).
     */
    static void write(Path kept, String magic, String key, Body body) {
        Path tmp = null;
        try {
            Files.createDirectories(kept.getParent());
            tmp = Files.createTempFile(kept.getParent(), kept.getFileName().toString(), ".tmp");
            try (OutputStream raw = Files.newOutputStream(tmp);
                 DataOutputStream out = new DataOutputStream(new BufferedOutputStream(raw, 1 << 16))) {
                out.writeUTF(magic);
                out.writeUTF(key);
                body.write(out);
            }
            Files.move(tmp, kept, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            try {
                if (tmp != null) Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // nothing more to do: the next run derives the data again
            }
        }
    }
}
