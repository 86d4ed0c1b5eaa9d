package dev.kpemu.machine.snapshot;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

import com.github.luben.zstd.ZstdInputStream;
import com.github.luben.zstd.ZstdOutputStream;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.Stateful;

/**
 * A whole machine saved at a safe point ({@link Machine#checkSnapshotPoint}) and restored into a
 * freshly built machine of the same kind, which then continues exactly as the saved one would
 * have: every vCPU ({@link CpuContext}), the machine's own state and clock
 * ({@link Machine#saveState}), every registered part ({@link Machine#stateParts}: devices,
 * interrupt controllers, with their pending clock events) and RAM ({@link MemoryImage}: only
 * non-zero pages).
 *
 * <p>File layout: the magic line {@value #MAGIC}, the format number, the identity (key/value
 * pairs the caller chooses: what the machine was built from; a restore refuses a snapshot whose
 * identity differs), then one zstd frame with a content checksum (a corrupt or truncated file is
 * refused) holding the arch, the CPU state, the machine state, each part as a named,
 * length-prefixed section, RAM, and an end marker.
 *
 * <p>Two formats: {@value #FORMAT} for a machine of one vCPU (unchanged since it was first
 * written), {@value #FORMAT_CPUS} for several (issue 26): the vCPU count follows the format
 * number in the header, before the identity, and the frame holds that many CPU states (each
 * engine's, in vCPU order) where format 1 holds one. Everything else a vCPU needs — its run
 * state, the current vCPU, the quantum left, the schedule's position, its interrupt latch — is
 * in the machine state ({@link Machine#saveState}); its devices (local APIC, GIC CPU interface
 * and banked interrupts, generic timer, PSCI power state) are parts. A restore needs a machine of
 * the same vCPU count and says so in one line otherwise.
 */
public final class MachineSnapshot {
    public static final String MAGIC = "KPEMU-SNAPSHOT\n";
    /** The format of a snapshot of a machine with one vCPU. */
    public static final int FORMAT = 1;
    /** The format of a snapshot of a machine with several vCPUs (the count in the header). */
    public static final int FORMAT_CPUS = 2;
    private static final long END = 0x4b50454d55454e44L;
    private static final int ZSTD_LEVEL = 3;

    /** What saving wrote: non-zero RAM pages and the file's size. */
    public record Saved(long ramPages, long bytes) {}

    private MachineSnapshot() {}

    /** Saves {@code m} to {@code file} (written beside it and moved into place, so a reader never sees half a file). */
    public static Saved save(Machine m, Map<String, String> identity, Path file) throws SnapshotException {
        m.checkSnapshotPoint();          // before a file is made
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp" + ProcessHandle.current().pid());
        try {
            if (file.getParent() != null) Files.createDirectories(file.getParent());
            long pages;
            try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 16)) {
                pages = save(m, identity, out);
            }
            long bytes = Files.size(tmp);
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            return new Saved(pages, bytes);
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // nothing more to do
            }
            throw new SnapshotException(SnapshotException.Kind.IO, "cannot write snapshot " + file + ": " + e.getMessage(), e);
        }
    }

    /** Saves {@code m} to {@code out}; returns the number of non-zero RAM pages written. */
    public static long save(Machine m, Map<String, String> identity, OutputStream out) throws IOException {
        return save(m, identity, out, true);
    }

    /**
     * As {@link #save(Machine, Map, OutputStream)} without the zstd frame: for a snapshot kept in
     * the host's memory and restored many times ({@link #restoreUncompressed}), which then skips
     * the decompression each restore would cost (~40 ms CPU for a 14 MiB image of 53 MiB).
     */
    public static long saveUncompressed(Machine m, Map<String, String> identity, OutputStream out) throws IOException {
        return save(m, identity, out, false);
    }

    private static long save(Machine m, Map<String, String> identity, OutputStream out, boolean compressed) throws IOException {
        m.checkSnapshotPoint();
        DataOutputStream head = new DataOutputStream(out);
        int cpus = m.cpuCount();
        head.write(MAGIC.getBytes(StandardCharsets.US_ASCII));
        head.writeInt(cpus == 1 ? FORMAT : FORMAT_CPUS);
        if (cpus > 1) head.writeInt(cpus);
        head.writeInt(identity.size());
        for (var e : identity.entrySet()) {
            head.writeUTF(e.getKey());
            head.writeUTF(e.getValue());
        }
        head.flush();
        OutputStream z;
        if (compressed) {
            ZstdOutputStream zstd = new ZstdOutputStream(nonClosing(out), ZSTD_LEVEL);
            zstd.setChecksum(true);
            z = zstd;
        } else {
            z = nonClosing(out);
        }
        DataOutputStream d = new DataOutputStream(new BufferedOutputStream(z, 1 << 16));
        d.writeUTF(m.arch().name());
        if (cpus > 1) d.writeInt(cpus);
        for (int i = 0; i < cpus; i++) {
            byte[] cpu = CpuContext.save(m, i);
            d.writeInt(cpu.length);
            d.write(cpu);
        }
        writeSection(d, m::saveState);
        d.writeInt(m.stateParts().size());
        for (var e : m.stateParts().entrySet()) {
            d.writeUTF(e.getKey());
            writeSection(d, e.getValue()::saveState);
        }
        long pages = MemoryImage.save(m.memory(), d);
        d.writeLong(END);
        d.close();
        out.flush();
        return pages;
    }

    /** The identity a snapshot file records (without reading the rest). */
    public static Map<String, String> identity(Path file) throws SnapshotException {
        try (InputStream in = new BufferedInputStream(Files.newInputStream(file))) {
            return readHeader(new DataInputStream(in), file).identity();
        } catch (NoSuchFileException e) {
            throw new SnapshotException(SnapshotException.Kind.IO, "no snapshot " + file, e);
        } catch (IOException e) {
            throw corrupt(file, e);
        }
    }

    /**
     * Restores {@code file} into {@code m}, a freshly built machine of the kind the snapshot was
     * taken of (same devices, RAM layout), before it has run. The snapshot's identity must equal
     * {@code expected} (every key of either).
     */
    public static void restore(Machine m, Map<String, String> expected, Path file) throws SnapshotException {
        try (InputStream in = new BufferedInputStream(Files.newInputStream(file), 1 << 16)) {
            restore(m, expected, in, file.toString());
        } catch (NoSuchFileException e) {
            throw new SnapshotException(SnapshotException.Kind.IO, "no snapshot " + file, e);
        } catch (IOException e) {
            throw corrupt(file, e);
        }
    }

    /** As {@link #restore(Machine, Map, Path)} from a stream; {@code name} names it in messages. */
    public static void restore(Machine m, Map<String, String> expected, InputStream in, String name) throws SnapshotException {
        restore(m, expected, in, name, true);
    }

    /** Restores what {@link #saveUncompressed} wrote. */
    public static void restoreUncompressed(Machine m, Map<String, String> expected, InputStream in, String name) throws SnapshotException {
        restore(m, expected, in, name, false);
    }

    private static void restore(Machine m, Map<String, String> expected, InputStream in, String name, boolean compressed) throws SnapshotException {
        m.checkSnapshotPoint();
        try {
            DataInputStream head = new DataInputStream(in);
            Header h = readHeader(head, name);
            if (h.cpus() != m.cpuCount()) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                    "snapshot " + name + " is of a machine with " + cpus(h.cpus()) + ", this one has " + m.cpuCount());
            checkIdentity(h.identity(), expected, name);
            DataInputStream d = new DataInputStream(compressed
                    ? new BufferedInputStream(new ZstdInputStream(nonClosingIn(in)), 1 << 16) : nonClosingIn(in));
            String arch = d.readUTF();
            if (!arch.equals(m.arch().name())) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                    "snapshot " + name + " is of an " + arch + " machine, not " + m.arch().name());
            if (h.cpus() > 1 && d.readInt() != h.cpus()) throw new IOException("CPU count differs from the header's");
            byte[][] cpu = new byte[h.cpus()][];
            for (int i = 0; i < cpu.length; i++) {
                int cpuLen = d.readInt();
                if (cpuLen <= 0 || cpuLen > 1 << 20) throw new IOException("CPU state size out of range");
                cpu[i] = new byte[cpuLen];
                d.readFully(cpu[i]);
            }
            readSection(d, m::restoreState, "machine");
            int parts = d.readInt();
            if (parts != m.stateParts().size()) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                    "snapshot " + name + " has " + parts + " devices, this machine " + m.stateParts().size());
            for (var e : m.stateParts().entrySet()) {
                String part = d.readUTF();
                if (!part.equals(e.getKey())) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                        "snapshot " + name + " has device " + part + " where this machine has " + e.getKey());
                readSection(d, e.getValue()::restoreState, part);
            }
            MemoryImage.restore(m.memory(), d, m.hasRun());
            if (d.readLong() != END) throw new IOException("no end marker");
            // the frame's checksum is verified when its end is read
            if (d.read() != -1) throw new IOException("data after the end marker");
            for (int i = 0; i < cpu.length; i++) CpuContext.restore(m, i, cpu[i]);
        } catch (SnapshotException e) {
            throw e.kind() == SnapshotException.Kind.CORRUPT || e.getMessage().startsWith("snapshot ") ? e
                    : new SnapshotException(e.kind(), "snapshot " + name + ": " + e.getMessage(), e);
        } catch (IOException | RuntimeException e) {
            throw corrupt(name, e);
        }
    }

    private static String cpus(int n) { return n == 1 ? "1 CPU" : n + " CPUs"; }

    /** What a file's header says: its format, the machine's vCPU count and the identity. */
    private record Header(int format, int cpus, Map<String, String> identity) {}

    private static Header readHeader(DataInputStream head, Object name) throws IOException, SnapshotException {
        byte[] magic = new byte[MAGIC.length()];
        try {
            head.readFully(magic);
        } catch (EOFException e) {
            throw new SnapshotException(SnapshotException.Kind.CORRUPT, "snapshot " + name + " is not a kpemu snapshot (too short)");
        }
        if (!Arrays.equals(magic, MAGIC.getBytes(StandardCharsets.US_ASCII))) {
            throw new SnapshotException(SnapshotException.Kind.CORRUPT, "snapshot " + name + " is not a kpemu snapshot");
        }
        int format = head.readInt();
        if (format != FORMAT && format != FORMAT_CPUS) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                "snapshot " + name + " has format " + format + ", this kpemu reads " + FORMAT + " and " + FORMAT_CPUS);
        int cpus = 1;
        if (format == FORMAT_CPUS) {
            cpus = head.readInt();
            if (cpus < 2 || cpus > Machine.MAX_CPUS) throw new IOException("CPU count out of range");
        }
        int n = head.readInt();
        if (n < 0 || n > 256) throw new IOException("identity size out of range");
        Map<String, String> id = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) id.put(head.readUTF(), head.readUTF());
        return new Header(format, cpus, id);
    }

    private static void checkIdentity(Map<String, String> got, Map<String, String> expected, String name) throws SnapshotException {
        for (var e : expected.entrySet()) {
            String v = got.get(e.getKey());
            if (!e.getValue().equals(v)) {
                throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE, "snapshot " + name + " was taken of another machine: "
                        + e.getKey() + " is " + (v == null ? "not recorded" : "'" + abbreviate(v) + "'") + ", this boot's '" + abbreviate(e.getValue()) + "'");
            }
        }
        for (String k : got.keySet()) {
            if (!expected.containsKey(k)) throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE,
                    "snapshot " + name + " was taken of another machine: it records " + k + ", which this boot does not have");
        }
    }

    private static String abbreviate(String s) { return s.length() <= 80 ? s : s.substring(0, 77) + "..."; }

    @FunctionalInterface private interface Writer { void write(java.io.DataOutput out) throws IOException; }

    @FunctionalInterface private interface Reader { void read(java.io.DataInput in) throws IOException; }

    private static void writeSection(DataOutputStream d, Writer w) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        DataOutputStream o = new DataOutputStream(buf);
        w.write(o);
        o.flush();
        d.writeInt(buf.size());
        buf.writeTo(d);
    }

    private static void readSection(DataInputStream d, Reader r, String what) throws IOException {
        int len = d.readInt();
        if (len < 0 || len > 1 << 24) throw new IOException(what + " state size out of range");
        byte[] b = new byte[len];
        d.readFully(b);
        ByteArrayInputStream bin = new ByteArrayInputStream(b);
        r.read(new DataInputStream(bin));
        if (bin.available() != 0) throw new IOException(what + " state has " + bin.available() + " bytes left over");
    }

    private static SnapshotException corrupt(Object name, Exception e) {
        String why = e instanceof EOFException ? "truncated" : e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return new SnapshotException(SnapshotException.Kind.CORRUPT, "snapshot " + name + " is corrupt: " + why, e);
    }

    private static OutputStream nonClosing(OutputStream out) {
        return new java.io.FilterOutputStream(out) {
            @Override public void write(byte[] b, int off, int len) throws IOException { out.write(b, off, len); }
            @Override public void close() throws IOException { out.flush(); }
        };
    }

    private static InputStream nonClosingIn(InputStream in) {
        return new java.io.FilterInputStream(in) {
            @Override public void close() { }
        };
    }
}
