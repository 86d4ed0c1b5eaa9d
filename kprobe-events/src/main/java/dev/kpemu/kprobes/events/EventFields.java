package dev.kpemu.kprobes.events;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The fields of a kprobe event as ftrace's filters and hist triggers name them
 * ({@code trace_find_event_field}): the event's own fields of its {@code format} file
 * ({@code __probe_ip}, or {@code __probe_func} and {@code __probe_ret_ip}, then each fetch
 * argument), the common fields ({@code common_type}, {@code common_flags},
 * {@code common_preempt_count}, {@code common_pid}) and the generic ones ({@code CPU}/{@code cpu},
 * {@code COMM}/{@code comm}: the current task's, not stored in the record). Values are read
 * from a {@link TraceRecord}.
 */
public final class EventFields {
    /** How a field compares: a number of {@code size} bytes, a stored string, the task's comm, the cpu. */
    public enum Kind { NUMBER, STRING, COMM, CPU }

    /** One field: its name, kind, size in the record and signedness (as the format file's {@code signed:}). */
    public record Field(String name, Kind kind, int size, boolean signed) {
        public boolean isString() { return kind == Kind.STRING || kind == Kind.COMM; }
    }

    private final Map<String, Field> fields = new LinkedHashMap<>();

    private EventFields() {}

    /** The fields of events defined by {@code def} (every probe of an event has the same fields). */
    public static EventFields of(TraceProbe def) {
        EventFields f = new EventFields();
        if (def.isReturn()) {
            f.add(new Field("__probe_func", Kind.NUMBER, 8, false));
            f.add(new Field("__probe_ret_ip", Kind.NUMBER, 8, false));
        } else {
            f.add(new Field("__probe_ip", Kind.NUMBER, 8, false));
        }
        for (FetchArg a : def.args()) {
            if (a.type().isString() && a.arrayLength() == 0) f.add(new Field(a.name(), Kind.STRING, 4, true));
            else f.add(new Field(a.name(), Kind.NUMBER, a.fieldSize(), a.type().signed()));
        }
        for (Field g : List.of(new Field("CPU", Kind.CPU, 4, true), new Field("COMM", Kind.COMM, 16, true),
                new Field("comm", Kind.COMM, 16, true), new Field("cpu", Kind.CPU, 4, true),
                new Field("common_type", Kind.NUMBER, 2, false), new Field("common_flags", Kind.NUMBER, 1, false),
                new Field("common_preempt_count", Kind.NUMBER, 1, false), new Field("common_pid", Kind.NUMBER, 4, true)))
            f.fields.putIfAbsent(g.name(), g);
        return f;
    }

    private void add(Field field) { fields.putIfAbsent(field.name(), field); }

    /** The field called {@code name}, or null. */
    public Field find(String name) { return fields.get(name); }

    /**
     * A number field's value as the kernel's comparison and hist functions read it: the field's
     * {@code size} bytes, sign-extended when signed, zero-extended otherwise.
     */
    public static long number(TraceRecord r, Field f) {
        long v = switch (f.name()) {
            case "__probe_ip", "__probe_func" -> r.ip();
            case "__probe_ret_ip" -> r.retIp();
            case "common_type" -> r.id();
            case "common_flags" -> r.commonFlags();
            case "common_preempt_count" -> 0;
            case "common_pid" -> r.context().pid();
            case "CPU", "cpu" -> r.context().cpu();
            default -> argBits(r.arg(f.name()));
        };
        return extend(v, f.size(), f.signed());
    }

    /** A string field's text (an argument that faulted reads as the empty string), or the task's comm. */
    public static String string(TraceRecord r, Field f) {
        if (f.kind() == Kind.COMM) return r.context().comm();
        EventArg a = r.arg(f.name());
        return a == null || a.value() == null ? "" : (String) a.value();
    }

    /** An argument's stored bytes as one little-endian number (an array's first 8 bytes). */
    private static long argBits(EventArg a) {
        if (a == null) return 0;
        if (!a.isArray()) return a.bits();
        long v = 0;
        int shift = 0, size = a.type().size();
        for (Object e : a.elements()) {
            if (shift >= 64) break;
            long bits = size == 8 ? (Long) e : (Long) e & ((1L << (8 * size)) - 1);
            v |= bits << shift;
            shift += 8 * size;
        }
        return v;
    }

    /** {@code v} cut to {@code size} bytes and extended back to 64 bits. */
    public static long extend(long v, int size, boolean signed) {
        if (size >= 8) return v;
        int bits = 8 * size;
        return signed ? (v << (64 - bits)) >> (64 - bits) : v & ((1L << bits) - 1);
    }
}
