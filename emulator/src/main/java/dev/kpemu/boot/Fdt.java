package dev.kpemu.boot;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A parsed flattened device tree (read back what {@link FdtWriter} wrote, or any v16/v17 blob):
 * nodes with their properties, and the memory reservation map.
 */
public final class Fdt {
    /** A node: its name (with unit address), properties in order, children in order. */
    public record Node(String name, Map<String, byte[]> properties, List<Node> children) {
        public Optional<Node> child(String name) {
            return children.stream().filter(c -> c.name().equals(name)).findFirst();
        }

        /** The node at a slash-separated path below this one ({@code "cpus/cpu@0"}). */
        public Optional<Node> find(String path) {
            Node n = this;
            for (String part : path.split("/")) {
                if (part.isEmpty()) continue;
                Optional<Node> c = n.child(part);
                if (c.isEmpty()) return Optional.empty();
                n = c.get();
            }
            return Optional.of(n);
        }

        public boolean has(String property) { return properties.containsKey(property); }

        /** The property's strings (a string list). */
        public List<String> strings(String property) {
            byte[] v = properties.get(property);
            List<String> out = new ArrayList<>();
            if (v == null) return out;
            int s = 0;
            for (int i = 0; i < v.length; i++) {
                if (v[i] == 0) {
                    out.add(new String(v, s, i - s, StandardCharsets.UTF_8));
                    s = i + 1;
                }
            }
            return out;
        }

        public String string(String property) {
            List<String> s = strings(property);
            return s.isEmpty() ? null : s.get(0);
        }

        /** The property's 32-bit cells. */
        public int[] cells(String property) {
            byte[] v = properties.get(property);
            if (v == null) return null;
            ByteBuffer b = ByteBuffer.wrap(v).order(ByteOrder.BIG_ENDIAN);
            int[] out = new int[v.length / 4];
            for (int i = 0; i < out.length; i++) out[i] = b.getInt();
            return out;
        }

        /** A property read as one big-endian number of 4 or 8 bytes. */
        public long number(String property) {
            byte[] v = properties.get(property);
            if (v == null || (v.length != 4 && v.length != 8)) throw new IllegalArgumentException(property + " is not a 32- or 64-bit number");
            ByteBuffer b = ByteBuffer.wrap(v).order(ByteOrder.BIG_ENDIAN);
            return v.length == 4 ? Integer.toUnsignedLong(b.getInt()) : b.getLong();
        }
    }

    private final int version, bootCpu, totalSize;
    private final List<long[]> reservations;
    private final Node root;

    private Fdt(int version, int bootCpu, int totalSize, List<long[]> reservations, Node root) {
        this.version = version;
        this.bootCpu = bootCpu;
        this.totalSize = totalSize;
        this.reservations = reservations;
        this.root = root;
    }

    public int version() { return version; }

    public int bootCpu() { return bootCpu; }

    public int totalSize() { return totalSize; }

    public List<long[]> reservations() { return reservations; }

    public Node root() { return root; }

    /** Parses a blob; throws {@link IllegalArgumentException} when it is malformed. */
    public static Fdt parse(byte[] blob) {
        ByteBuffer b = ByteBuffer.wrap(blob).order(ByteOrder.BIG_ENDIAN);
        if (blob.length < FdtWriter.HEADER_SIZE || b.getInt(0) != FdtWriter.MAGIC) throw new IllegalArgumentException("not a flattened device tree (bad magic)");
        int total = b.getInt(4), structOff = b.getInt(8), stringsOff = b.getInt(12), rsvOff = b.getInt(16);
        int version = b.getInt(20), bootCpu = b.getInt(28), stringsSize = b.getInt(32), structSize = b.getInt(36);
        if (total > blob.length || structOff + structSize > total || stringsOff + stringsSize > total) {
            throw new IllegalArgumentException("device tree blocks lie outside the blob");
        }
        List<long[]> rsv = new ArrayList<>();
        for (int p = rsvOff; ; p += 16) {
            long a = b.getLong(p), s = b.getLong(p + 8);
            if (a == 0 && s == 0) break;
            rsv.add(new long[] {a, s});
        }
        int[] pos = {structOff};
        Node root = null;
        List<Node> stack = new ArrayList<>();
        while (true) {
            int token = b.getInt(pos[0]);
            pos[0] += 4;
            switch (token) {
                case FdtWriter.FDT_BEGIN_NODE -> {
                    int end = pos[0];
                    while (blob[end] != 0) end++;
                    String name = new String(blob, pos[0], end - pos[0], StandardCharsets.US_ASCII);
                    pos[0] = (end + 1 + 3) & ~3;
                    Node n = new Node(name, new LinkedHashMap<>(), new ArrayList<>());
                    if (stack.isEmpty()) {
                        if (root != null) throw new IllegalArgumentException("two root nodes");
                        root = n;
                    } else {
                        stack.get(stack.size() - 1).children().add(n);
                    }
                    stack.add(n);
                }
                case FdtWriter.FDT_END_NODE -> {
                    if (stack.isEmpty()) throw new IllegalArgumentException("unbalanced FDT_END_NODE");
                    stack.remove(stack.size() - 1);
                }
                case FdtWriter.FDT_PROP -> {
                    if (stack.isEmpty()) throw new IllegalArgumentException("property outside a node");
                    int len = b.getInt(pos[0]), nameOff = b.getInt(pos[0] + 4);
                    pos[0] += 8;
                    byte[] value = java.util.Arrays.copyOfRange(blob, pos[0], pos[0] + len);
                    pos[0] = (pos[0] + len + 3) & ~3;
                    int s = stringsOff + nameOff, e = s;
                    while (blob[e] != 0) e++;
                    stack.get(stack.size() - 1).properties().put(new String(blob, s, e - s, StandardCharsets.US_ASCII), value);
                }
                case FdtWriter.FDT_NOP -> { }
                case FdtWriter.FDT_END -> {
                    if (!stack.isEmpty() || root == null) throw new IllegalArgumentException("FDT_END with open nodes");
                    return new Fdt(version, bootCpu, total, rsv, root);
                }
                default -> throw new IllegalArgumentException("bad structure token 0x" + Integer.toHexString(token) + " at " + (pos[0] - 4));
            }
        }
    }
}
