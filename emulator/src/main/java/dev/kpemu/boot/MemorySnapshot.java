package dev.kpemu.boot;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Map;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.snapshot.MachineSnapshot;
import dev.kpemu.machine.snapshot.SnapshotException;

/**
 * A machine snapshot ({@link MachineSnapshot}) kept in the host's memory, taken at a host
 * breakpoint's stop the caller chooses (a hook's {@link BootHooks#breakpoint}) and restored by
 * {@link BootRunner#bootFrom} into a new machine of the
 * same boot, which hands the hooks that breakpoint's stop first. {@code kpemu faults} keeps one at
 * the command's exec. The identity names the arch and the point only: the caller restores it into
 * the boot it took it of. It is kept uncompressed (~53 MiB for an x86-64 Debian guest at a
 * command's exec): a restore reads it without zstd-decompressing it again; it is immutable, so
 * parallel rows restore from one copy.
 */
public final class MemorySnapshot {
    private final byte[] image;
    private final Map<String, String> identity;

    private MemorySnapshot(byte[] image, Map<String, String> identity) {
        this.image = image;
        this.identity = identity;
    }

    /** Saves {@code m}, stopped at a safe point ({@link Machine#checkSnapshotPoint}: no probes attached); {@code point} names it. */
    public static MemorySnapshot take(Machine m, String point) {
        Map<String, String> identity = Map.of("arch", m.arch().name(), "point", point);
        ByteArrayOutputStream out = new ByteArrayOutputStream(64 << 20);
        try {
            MachineSnapshot.saveUncompressed(m, identity, out);
        } catch (IOException e) {
            throw new IllegalStateException("cannot save a snapshot in memory: " + e.getMessage(), e);
        }
        return new MemorySnapshot(out.toByteArray(), identity);
    }

    /** Restores it into {@code m}, a freshly built machine of the boot it was taken of. */
    void restoreInto(Machine m) throws SnapshotException {
        MachineSnapshot.restoreUncompressed(m, identity, new ByteArrayInputStream(image), "in memory at " + identity.get("point"));
    }

    /** Its size (uncompressed). */
    public long bytes() { return image.length; }

    public String point() { return identity.get("point"); }
}
