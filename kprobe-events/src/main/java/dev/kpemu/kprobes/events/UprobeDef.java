package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * {@code p[:[GRP/]EVENT] PATH:OFFSET[(REF_CTR_OFFSET)] [FETCHARGS]}, {@code r...} or
 * {@code PATH:OFFSET%return}: a probe on the file {@code path} (as written; {@code file} is the
 * path with symlinks resolved) at file offset {@code offset}. {@code refCtrOffset} is 0 when not
 * given (the kernel lists none then).
 */
public record UprobeDef(String group, String event, String path, String file, long offset, long refCtrOffset,
                        boolean isReturn, List<FetchArg> args, String command) implements UprobeCommand {
    public UprobeDef {
        args = List.copyOf(args);
    }

    /** The probe's line in {@code uprobe_events} ({@code trace_uprobe_show}), without newline. */
    public String listing() {
        StringBuilder sb = new StringBuilder();
        sb.append(isReturn ? 'r' : 'p').append(':').append(group).append('/').append(event).append(' ')
                .append(path).append(':').append(String.format("0x%016x", offset));
        if (refCtrOffset != 0) sb.append("(0x").append(Long.toHexString(refCtrOffset)).append(')');
        for (FetchArg a : args) sb.append(' ').append(a.name()).append('=').append(a.expression());
        return sb.toString();
    }

    /** One {@code uprobe_profile} line: {@code "  %s %-44s %15lu"} (no trailing newline). */
    public String profileLine(long hits) {
        return String.format("  %s %-44s %15s", path, event, Long.toUnsignedString(hits));
    }
}
