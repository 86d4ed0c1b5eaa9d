package dev.kpemu.boot;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes a flattened device tree blob (Devicetree Specification v0.4, chapter 5): a 40-byte
 * header, the memory reservation map, the structure block and the strings block, all
 * big-endian. Nodes are opened and closed in order; property names are deduplicated in the
 * strings block.
 *
 * <pre>
 * FdtWriter w = new FdtWriter();
 * w.beginNode("");                       // the root
 * w.property("compatible", "linux,dummy-virt");
 * w.propertyU32("#address-cells", 2);
 * w.endNode();
 * byte[] dtb = w.finish();
 * </pre>
 */
public final class FdtWriter {
    public static final int MAGIC = 0xd00d_feed;
    public static final int VERSION = 17, LAST_COMPATIBLE_VERSION = 16;
    public static final int HEADER_SIZE = 40;
    public static final int FDT_BEGIN_NODE = 1, FDT_END_NODE = 2, FDT_PROP = 3, FDT_NOP = 4, FDT_END = 9;

    private final ByteArrayOutputStream struct = new ByteArrayOutputStream();
    private final ByteArrayOutputStream strings = new ByteArrayOutputStream();
    private final Map<String, Integer> stringOffsets = new LinkedHashMap<>();
    private final List<long[]> reservations = new ArrayList<>();
    private int depth;
    private boolean finished;
    private int bootCpu;

    /** Adds a memory reservation map entry. */
    public FdtWriter reserve(long address, long size) {
        reservations.add(new long[] {address, size});
        return this;
    }

    /** The physical ID of the boot CPU (header field boot_cpuid_phys). */
    public FdtWriter bootCpu(int id) {
        bootCpu = id;
        return this;
    }

    public FdtWriter beginNode(String name) {
        checkOpen();
        if (depth == 0 && !name.isEmpty()) throw new IllegalStateException("the first node is the root (empty name)");
        u32(FDT_BEGIN_NODE);
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        struct.writeBytes(n);
        struct.write(0);
        pad();
        depth++;
        return this;
    }

    public FdtWriter endNode() {
        checkOpen();
        if (depth == 0) throw new IllegalStateException("no open node");
        u32(FDT_END_NODE);
        depth--;
        return this;
    }

    /** A property with raw bytes as its value. */
    public FdtWriter property(String name, byte[] value) {
        checkOpen();
        if (depth == 0) throw new IllegalStateException("property outside a node");
        u32(FDT_PROP);
        u32(value.length);
        u32(stringOffset(name));
        struct.writeBytes(value);
        pad();
        return this;
    }

    /** An empty (boolean) property such as {@code interrupt-controller}. */
    public FdtWriter property(String name) { return property(name, new byte[0]); }

    /** A string or string-list property (each string NUL-terminated). */
    public FdtWriter property(String name, String... values) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (String v : values) {
            b.writeBytes(v.getBytes(StandardCharsets.UTF_8));
            b.write(0);
        }
        return property(name, b.toByteArray());
    }

    /** A list of 32-bit cells. */
    public FdtWriter propertyU32(String name, int... cells) {
        ByteBuffer b = ByteBuffer.allocate(4 * cells.length).order(ByteOrder.BIG_ENDIAN);
        for (int c : cells) b.putInt(c);
        return property(name, b.array());
    }

    /** A list of 64-bit values (two cells each). */
    public FdtWriter propertyU64(String name, long... values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.BIG_ENDIAN);
        for (long v : values) b.putLong(v);
        return property(name, b.array());
    }

    /** Closes the tree and returns the blob. */
    public byte[] finish() {
        checkOpen();
        if (depth != 0) throw new IllegalStateException(depth + " node(s) still open");
        u32(FDT_END);
        finished = true;
        int rsvOff = HEADER_SIZE;                                  // 8-byte aligned
        int rsvSize = 16 * (reservations.size() + 1);
        int structOff = rsvOff + rsvSize;
        int structSize = struct.size();
        int stringsOff = structOff + structSize;
        int stringsSize = strings.size();
        int total = stringsOff + stringsSize;
        ByteBuffer b = ByteBuffer.allocate(total).order(ByteOrder.BIG_ENDIAN);
        b.putInt(MAGIC).putInt(total).putInt(structOff).putInt(stringsOff).putInt(rsvOff)
                .putInt(VERSION).putInt(LAST_COMPATIBLE_VERSION).putInt(bootCpu).putInt(stringsSize).putInt(structSize);
        for (long[] r : reservations) b.putLong(r[0]).putLong(r[1]);
        b.putLong(0).putLong(0);
        b.put(struct.toByteArray());
        b.put(strings.toByteArray());
        return b.array();
    }

    private int stringOffset(String name) {
        return stringOffsets.computeIfAbsent(name, n -> {
            int off = strings.size();
            strings.writeBytes(n.getBytes(StandardCharsets.US_ASCII));
            strings.write(0);
            return off;
        });
    }

    private void u32(int v) {
        struct.write(v >>> 24);
        struct.write(v >>> 16);
        struct.write(v >>> 8);
        struct.write(v);
    }

    private void pad() {
        while ((struct.size() & 3) != 0) struct.write(0);
    }

    private void checkOpen() {
        if (finished) throw new IllegalStateException("device tree already finished");
    }
}
