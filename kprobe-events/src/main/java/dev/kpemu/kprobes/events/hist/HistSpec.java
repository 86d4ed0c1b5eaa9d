package dev.kpemu.kprobes.events.hist;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.events.EventFields;
import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterDialect;
import dev.kpemu.kprobes.events.filter.FilterParseException;

/**
 * A hist trigger command as written to an event's {@code trigger} file:
 * {@code hist:keys=K[.mod][,K2...][:vals=V[,V2...]][:sort=S[.descending][,S2...]][:size=N][:name=X] [if FILTER]}.
 * Key modifiers: {@code .hex}, {@code .sym}, {@code .sym-offset}, {@code .execname} (on
 * {@code common_pid}), {@code .log2}; values: {@code hitcount} and number fields ({@code .hex}).
 * At most three keys, three values besides hitcount and two sort keys ({@code TRACING_MAP_*_MAX});
 * the size is rounded up to a power of two between 128 and 131072 (default 2048).
 */
public final class HistSpec {
    /** A key or value field with its modifier (null: none). */
    public record HistField(EventFields.Field field, String modifier) {
        /**
         * The field's name as the kernel prints it ({@code hist_field_name}): the cpu, whichever of
         * {@code common_cpu}, {@code cpu} or {@code CPU} named it, is {@code common_cpu}.
         */
        public String name() {
            if (field == null) return "hitcount";
            return field.kind() == EventFields.Kind.CPU ? "common_cpu" : field.name();
        }

        /** As the trigger info prints it ({@code hist_field_print}). */
        public String printed() { return modifier == null ? name() : name() + "." + modifier; }

        public boolean isString() { return field != null && field.isString(); }
    }

    /** A sort key: a key field, a value field or hitcount. */
    public record SortKey(HistField field, boolean isKey, int index, boolean descending) {}

    static final int KEYS_MAX = 3, VALS_MAX = 3, BITS_DEFAULT = 11, BITS_MIN = 7, BITS_MAX = 17;

    final List<HistField> keys = new ArrayList<>();
    final List<HistField> vals = new ArrayList<>();
    final List<SortKey> sort = new ArrayList<>();
    int mapBits = BITS_DEFAULT;
    String name;
    String filterText;
    EventFilter filter;

    private HistSpec() {}

    /** The command as the kernel's error_log shows it ({@code last_cmd}: the text written, stripped). */
    private String command;

    /** Parses {@code text} (the whole line written to {@code trigger}) against the event's fields. */
    public static HistSpec parse(String text, EventFields fields) throws HistTriggerException {
        return parse(text, fields, FilterDialect.LINUX_6_1);
    }

    /** As {@link #parse(String, EventFields)}, the trigger's filter parsed and refused as the kernel of {@code dialect} does. */
    public static HistSpec parse(String text, EventFields fields, FilterDialect dialect) throws HistTriggerException {
        String t = text.strip();
        HistSpec h = new HistSpec();
        h.command = t;
        int sp = indexOfSpace(t);
        String param = sp < 0 ? t : t.substring(0, sp);
        String rest = sp < 0 ? "" : t.substring(sp).strip();
        if (!param.startsWith("hist")) throw new HistTriggerException("unknown trigger command: " + param);
        if (!rest.isEmpty()) {
            if (!rest.startsWith("if") || rest.length() > 2 && !Character.isWhitespace(rest.charAt(2)))
                throw new HistTriggerException("Invalid argument: expected 'if FILTER' after the trigger, found '" + rest + "'");
            h.filterText = rest.substring(2).strip();
            try {
                h.filter = EventFilter.parse(h.filterText, fields, dialect);
            } catch (FilterParseException e) {
                // the kernel refuses the trigger (EINVAL); 6.1 logs nothing about its filter, 6.12
                // and later log the filter's own parse error
                String why = "Invalid argument: the trigger's filter: " + (e.error() == null ? "Error" : e.error().text());
                if (dialect.triggerFilterLogged()) throw new HistTriggerException(why, e.errorLog());
                throw new HistTriggerException(why);
            }
        }
        String keysStr = null, valsStr = null, sortStr = null;
        String[] parts = param.split(":", -1);
        if (!parts[0].equals("hist")) throw new HistTriggerException("unknown trigger command: " + parts[0]);
        for (int i = 1; i < parts.length; i++) {
            String p = parts[i];
            int eq = p.indexOf('=');
            String k = eq < 0 ? p : p.substring(0, eq), v = eq < 0 ? null : p.substring(eq + 1);
            switch (k) {
                case "keys", "key" -> keysStr = v;
                case "vals", "values", "val" -> valsStr = v;
                case "sort" -> sortStr = v;
                case "size" -> h.mapBits = mapBits(v);
                case "name" -> h.name = v;
                default -> throw new HistTriggerException("Invalid argument: unsupported hist attribute '" + p + "'");
            }
        }
        if (keysStr == null || keysStr.isEmpty()) throw new HistTriggerException("Invalid argument: hist needs keys=");
        for (String k : keysStr.split(",")) {
            if (h.keys.size() == KEYS_MAX) throw new HistTriggerException("Invalid argument: at most " + KEYS_MAX + " keys");
            h.keys.add(h.field(k, fields, true));
        }
        if (valsStr != null) {
            for (String v : valsStr.split(",")) {
                if (v.equals("hitcount")) continue;
                if (h.vals.size() == VALS_MAX) throw new HistTriggerException("Invalid argument: at most " + VALS_MAX + " values");
                HistField f = h.field(v, fields, false);
                if (f.isString()) throw new HistTriggerException("Invalid argument: a string field cannot be a value: " + v);
                h.vals.add(f);
            }
        }
        if (sortStr == null) sortStr = "hitcount";
        String[] sorts = sortStr.split(",");
        if (sorts.length > 2) throw new HistTriggerException("Invalid argument: at most 2 sort keys");
        for (String s : sorts) h.sort.add(h.sortKey(s));
        return h;
    }

    private static int indexOfSpace(String s) {
        for (int i = 0; i < s.length(); i++) if (Character.isWhitespace(s.charAt(i))) return i;
        return -1;
    }

    private static int mapBits(String v) throws HistTriggerException {
        long size;
        try {
            size = Long.decode(v);
        } catch (NumberFormatException | NullPointerException e) {
            throw new HistTriggerException("Invalid argument: size=" + v);
        }
        int bits = size <= 1 ? 0 : 64 - Long.numberOfLeadingZeros(size - 1);
        if (bits < BITS_MIN || bits > BITS_MAX) throw new HistTriggerException("Invalid argument: size=" + v);
        return bits;
    }

    /** The modifiers {@code parse_field} knows (others: Invalid field modifier). */
    private static final java.util.Set<String> MODIFIERS = java.util.Set.of("hex", "sym", "sym-offset", "execname",
            "syscall", "log2", "usecs", "percent", "graph", "stacktrace");

    /** {@code parse_field}: the modifier is checked first, then the field. */
    private HistField field(String spec, EventFields fields, boolean key) throws HistTriggerException {
        int dot = spec.indexOf('.');
        String name = dot < 0 ? spec : spec.substring(0, dot), mod = dot < 0 ? null : spec.substring(dot + 1);
        if (mod != null && !MODIFIERS.contains(mod) && !mod.startsWith("buckets"))
            throw logged("Invalid field modifier", mod);
        // parse_field: "common_cpu" is the cpu; so are the generic fields cpu and CPU (FILTER_CPU, size 0)
        EventFields.Field f = fields.find(name.equals("common_cpu") ? "cpu" : name);
        if (f == null || f.kind() == EventFields.Kind.COMM) throw logged("Couldn't find field", name);
        if (mod != null) {
            boolean ok = switch (mod) {
                case "hex" -> !f.isString();
                case "sym", "sym-offset", "log2" -> key && !f.isString();
                case "execname" -> key && name.equals("common_pid");
                default -> false;
            };
            if (!ok) throw new HistTriggerException("Invalid argument: kpemu does not support ." + mod + " on " + name + " here");
        }
        return new HistField(f, mod);
    }

    /** A refusal the kernel logs, its caret under the first occurrence of {@code at} in the command ({@code errpos}). */
    private HistTriggerException logged(String error, String at) {
        int pos = command.indexOf(at);
        return new HistTriggerException(error, command, pos < 0 ? 0 : pos);
    }

    private SortKey sortKey(String s) throws HistTriggerException {
        boolean desc = false;
        if (s.endsWith(".descending")) {
            desc = true;
            s = s.substring(0, s.length() - ".descending".length());
        } else if (s.endsWith(".ascending")) {
            s = s.substring(0, s.length() - ".ascending".length());
        }
        if (s.equals("hitcount")) return new SortKey(new HistField(null, null), false, 0, desc);
        String name = s.contains(".") ? s.substring(0, s.indexOf('.')) : s;
        for (int i = 0; i < vals.size(); i++) if (vals.get(i).name().equals(name)) return new SortKey(vals.get(i), false, i + 1, desc);
        for (int i = 0; i < keys.size(); i++) if (keys.get(i).name().equals(name)) return new SortKey(keys.get(i), true, i, desc);
        throw logged("Sort field must be a key or a val", name);
    }

    /** The trigger info line ({@code event_hist_trigger_print}), without the state and newline. */
    String printed() {
        StringBuilder sb = new StringBuilder("hist:");
        if (name != null) sb.append(name).append(':');
        sb.append("keys=");
        for (int i = 0; i < keys.size(); i++) sb.append(i > 0 ? "," : "").append(keys.get(i).printed());
        sb.append(":vals=hitcount");
        for (HistField v : vals) sb.append(',').append(v.printed());
        sb.append(":sort=");
        for (int i = 0; i < sort.size(); i++) {
            SortKey k = sort.get(i);
            sb.append(i > 0 ? "," : "").append(k.field().printed()).append(k.descending() ? ".descending" : "");
        }
        sb.append(":size=").append(1 << mapBits);
        if (filterText != null) sb.append(" if ").append(filterText);
        return sb.toString();
    }
}
