package dev.kpemu.api;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * What {@link Uprobe} and {@link Uretprobe} share: a place in a guest file ({@code PATH:OFFSET},
 * as {@code uprobe_events} takes it), {@code uprobe_events} fetch arguments, a handler.
 */
public abstract sealed class UserProbe permits Uprobe, Uretprobe {
    /** The group of the definitions the session registers for Java probes. */
    static final String GROUP = "kpemu_api";

    private final String path;
    private final long offset;
    private final List<String> fetchArgs = new ArrayList<>();
    Consumer<UprobeHit> handler = h -> { };
    volatile long hits;

    UserProbe(String path, long offset) {
        this.path = Objects.requireNonNull(path);
        if (offset < 0) throw new IllegalArgumentException("a file offset is not negative: " + offset);
        this.offset = offset;
    }

    /** The probed file as given (resolved in the guest's files when the session starts). */
    public String path() { return path; }

    /** The offset in the file. */
    public long offset() { return offset; }

    /** The {@code uprobe_events} fetch arguments ({@code %ax}, {@code +0(%di):string}, {@code $comm}...). */
    public List<String> fetchArgs() { return List.copyOf(fetchArgs); }

    /** Hits so far (entries for a {@link Uretprobe}'s returns seen). */
    public long hits() { return hits; }

    abstract boolean isReturn();

    void addFetchArgs(String... args) {
        for (String a : args) fetchArgs.add(Objects.requireNonNull(a));
    }

    /** The {@code uprobe_events} line the session registers for this probe as {@code event}. */
    String definition(String event) {
        StringBuilder sb = new StringBuilder(isReturn() ? "r:" : "p:").append(GROUP).append('/').append(event)
                .append(' ').append(path).append(":0x").append(Long.toHexString(offset));
        for (String a : fetchArgs) sb.append(' ').append(a);
        return sb.toString();
    }

    @Override public String toString() {
        return (isReturn() ? "uretprobe " : "uprobe ") + path + ":0x" + Long.toHexString(offset);
    }
}
