package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterDialect;
import dev.kpemu.kprobes.events.filter.FilterParseException;
import dev.kpemu.kprobes.events.hist.HistTriggerException;

/**
 * linux-next's wprobe triggers (Documentation/trace/wprobetrace.rst, {@code wprobe_trigger_cmd_parse}):
 * {@code set_wprobe:WPROBE:FIELD[+|-OFFS] [if FILTER]} points wprobe event {@code WPROBE} (of
 * group {@code wprobes}) at the address held in the triggering event's pointer-sized field
 * {@code FIELD}, plus {@code OFFS}; {@code clear_wprobe:WPROBE[:FIELD[+|-OFFS]] [if FILTER]}
 * stops it watching (with a field: only when it watches that address). kpemu moves the watch at
 * the run loop's next safe point (the end of the translated block that fired the trigger), where
 * Linux reprograms the debug registers at once: accesses in the rest of that block are not seen.
 *
 * @param field  the triggering event's field, or null ({@code clear_wprobe} without one)
 * @param filter the trigger's filter, or null
 */
public record WprobeTrigger(String command, boolean clear, String wprobe, String field, long adjust, EventFilter filter) {
    /** Whether {@code text} is a wprobe trigger command. */
    public static boolean isOne(String text) {
        String t = text.strip();
        return t.startsWith("set_wprobe:") || t.startsWith("clear_wprobe:") || t.equals("set_wprobe") || t.equals("clear_wprobe");
    }

    /** Parses {@code text} against the triggering event's definition {@code on}. */
    public static WprobeTrigger parse(String text, TraceProbe on, FilterDialect dialect) throws HistTriggerException {
        String t = text.strip();
        int sp = t.indexOf(' ');
        String param = sp < 0 ? t : t.substring(0, sp);
        String rest = sp < 0 ? "" : t.substring(sp).strip();
        boolean clear = param.startsWith("clear_wprobe");
        String[] parts = param.split(":", -1);
        if (parts.length < 2 || parts[1].isEmpty()) throw new HistTriggerException("Invalid argument: " + parts[0] + " needs a wprobe event");
        if (parts.length > 3 || !clear && parts.length < 3) throw new HistTriggerException("Invalid argument: " + parts[0]
                + (clear ? " takes :WPROBE[:FIELD[+OFFS]]" : " takes :WPROBE:FIELD[+OFFS]"));
        String field = null;
        long adjust = 0;
        if (parts.length == 3) {
            String f = parts[2];
            int cut = -1;
            for (int i = 0; i < f.length() && cut < 0; i++) if (f.charAt(i) == '+' || f.charAt(i) == '-') cut = i;
            if (cut >= 0) {
                Long o = Bytes.kstrtoll(f.substring(cut), 0);
                if (o == null) throw new HistTriggerException("Invalid argument: " + KernelError.BAD_DEREF_OFFS.message() + ": " + f.substring(cut));
                adjust = o;
                f = f.substring(0, cut);
            }
            FetchArg arg = null;
            for (FetchArg a : on.args()) if (a.name().equals(f)) arg = a;
            if (arg == null) throw new HistTriggerException("No such file or directory: " + on.event() + " has no field " + f);
            if (arg.fieldSize() != 8 || arg.type().isString())
                throw new HistTriggerException("Exec format error: field " + f + " is not pointer-sized (" + arg.type() + ")");
            field = f;
        }
        EventFilter filter = null;
        if (!rest.isEmpty()) {
            if (!rest.startsWith("if") || rest.length() > 2 && !Character.isWhitespace(rest.charAt(2)))
                throw new HistTriggerException("Invalid argument: expected 'if FILTER' after the trigger, found '" + rest + "'");
            try {
                filter = EventFilter.parse(rest.substring(2).strip(), EventFields.of(on), dialect);
            } catch (FilterParseException e) {
                throw new HistTriggerException("Invalid argument: the trigger's filter: " + (e.error() == null ? "Error" : e.error().text()));
            }
        }
        return new WprobeTrigger(t, clear, parts[1], field, adjust, filter);
    }

    /** The address the trigger names in {@code r} (its field plus the offset), or 0 without a field. */
    public long address(TraceRecord r) {
        if (field == null) return 0;
        EventArg a = r.arg(field);
        return a == null || !(a.value() instanceof Long v) ? 0 : v + adjust;
    }
}
