package dev.kpemu.boot;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * The guest console's sink: passes bytes on, keeps the last lines, and notices the lines the
 * boot runner acts on (a kernel panic, marker lines), with the guest time they appeared at.
 */
public final class ConsoleMonitor extends OutputStream {
    public static final String PANIC = "Kernel panic - not syncing";

    private final OutputStream out;
    private final int keepLines;
    private final Deque<String> tail = new ArrayDeque<>();
    private final StringBuilder line = new StringBuilder();
    private final List<String> watched;
    private final java.util.Map<String, long[]> seen = new java.util.LinkedHashMap<>();
    private final java.util.Map<String, String> seenLine = new java.util.HashMap<>();
    private final java.util.function.LongSupplier clock;
    private long bytes;
    private boolean panicked;

    public ConsoleMonitor(OutputStream out, int keepLines, List<String> watched, java.util.function.LongSupplier guestNanos) {
        this.out = out;
        this.keepLines = keepLines;
        this.watched = List.copyOf(watched);
        this.clock = guestNanos;
    }

    @Override
    public void write(int b) throws IOException {
        bytes++;
        if (out != null) out.write(b);
        if (b == '\n') {
            endLine();
        } else if (b != '\r') {
            line.append((char) (b & 0xff));
        }
    }

    @Override
    public void flush() throws IOException {
        if (out != null) out.flush();
    }

    private void endLine() {
        String l = line.toString();
        line.setLength(0);
        tail.addLast(l);
        while (tail.size() > keepLines) tail.removeFirst();
        if (l.contains(PANIC)) panicked = true;
        for (String w : watched) {
            if (l.contains(w) && seen.putIfAbsent(w, new long[] {clock.getAsLong(), System.nanoTime()}) == null) seenLine.put(w, l);
        }
    }

    public boolean panicked() { return panicked; }

    /** Guest time (ns) at which the first line containing {@code marker} appeared, or -1. */
    public long seenAt(String marker) { long[] t = seen.get(marker); return t == null ? -1 : t[0]; }

    /** Host System.nanoTime() at which the first line containing {@code marker} appeared, or -1. */
    public long seenAtHost(String marker) { long[] t = seen.get(marker); return t == null ? -1 : t[1]; }

    public boolean seen(String marker) { return seen.containsKey(marker); }

    /** The first line that contained the watched {@code marker}, or null. */
    public String firstLineWith(String marker) { return seenLine.get(marker); }

    public long bytes() { return bytes; }

    public List<String> lastLines() {
        List<String> r = new ArrayList<>(tail);
        if (!line.isEmpty()) r.add(line.toString());
        return r;
    }

    public String allTail() { return String.join("\n", lastLines()); }

    static String utf8(byte[] b) { return new String(b, StandardCharsets.UTF_8); }
}
