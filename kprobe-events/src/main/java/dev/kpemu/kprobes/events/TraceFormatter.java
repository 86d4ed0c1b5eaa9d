package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Kprobes;

import java.util.List;
import java.util.Objects;

/**
 * Text the kernel's tracefs shows for kprobe events: {@code trace} lines, the
 * {@code kprobe_events} listing, {@code kprobe_profile} lines and each event's
 * {@code format} file. Values are formatted per type exactly as
 * {@code trace_probe_print_args} does.
 */
public final class TraceFormatter {
    private final java.util.function.LongPredicate kretprobeTrampoline;
    private final KernelSymbols symbols;

    /** {@code symbols} serves {@code %pS} of probe addresses and {@code symbol}-typed values. */
    public TraceFormatter(KernelSymbols symbols) {
        this(symbols, address -> false);
    }

    /** @param kretprobeTrampoline whether an address is the kretprobe trampoline ({@code is_kretprobe_trampoline}) */
    public TraceFormatter(KernelSymbols symbols, java.util.function.LongPredicate kretprobeTrampoline) {
        this.symbols = Objects.requireNonNull(symbols);
        this.kretprobeTrampoline = kretprobeTrampoline;
    }

    /** What {@code seq_print_ip_sym} prints for the kretprobe trampoline ({@code KRETPROBE_MSG}). */
    public static final String KRETPROBE_MSG = "[unknown/kretprobe'd]";

    // ---- trace ---------------------------------------------------------------------------

    /** {@code trace_print_context}: {@code "%16s-%-7d [%03d] LLLLL %5lu.%06lu: "}. */
    public static String contextPrefix(TraceContext c) {
        return appendContextPrefix(new LineBytes(64), c).toText();
    }

    /** {@link #contextPrefix} appended to {@code b} as the guest's bytes. */
    public static LineBytes appendContextPrefix(LineBytes b, TraceContext c) {
        return appendContextPrefix(b, c.comm(), c.pid(), c.tgid(), c.cpu(), c.latency(), c.timestampNanos());
    }

    /**
     * {@link #contextPrefix} of the columns given one by one (a writer of many lines makes no
     * {@link TraceContext} per line): {@code comm} as {@link GuestText} carries it, padded by its
     * characters.
     */
    public static LineBytes appendContextPrefix(LineBytes b, String comm, int pid, Integer tgid, int cpu, String latency, long nanos) {
        return appendTimestamp(appendContextColumns(b, comm, pid, tgid, cpu, latency), nanos);
    }

    /** The prefix's columns before the timestamp: {@code "%16s-%-7d [%03d] LLLLL"} (the same for a task's hits in a row). */
    public static LineBytes appendContextColumns(LineBytes b, String comm, int pid, Integer tgid, int cpu, String latency) {
        if (pid < 0 || cpu < 0 || (tgid != null && tgid < 0)) {
            // what the padding below does not cover: negative numbers, as %d prints them
            b.text(String.format("%16s-%-7d ", comm, pid));
            if (tgid != null) b.text(tgid == 0 ? "(-------) " : String.format("(%7d) ", tgid));
            return appendStateColumns(b, cpu, latency);
        }
        // "%16s-%-7d [%03d] LAT" written out (a trace line is formatted per event; Formatter parses the
        // pattern each time), the numbers written in place: no string per number
        String name = String.valueOf(comm);
        b.fill(' ', 16 - name.length()).text(name);
        b.ascii('-').decimal(pid).fill(' ', 7 - LineBytes.digits(pid)).ascii(' ');
        if (tgid != null) {
            if (tgid == 0) b.text("(-------) ");
            else b.ascii('(').fill(' ', 7 - LineBytes.digits(tgid)).decimal(tgid).ascii(')').ascii(' ');
        }
        return appendStateColumns(b, cpu, latency);
    }

    /** The columns after the task's (and the tgid's): {@code "[%03d] LLLLL"}. */
    public static LineBytes appendStateColumns(LineBytes b, int cpu, String latency) {
        if (cpu < 0) b.text(String.format("[%03d] ", cpu));
        else b.ascii('[').fill('0', 3 - LineBytes.digits(cpu)).decimal(cpu).ascii(']').ascii(' ');
        return b.text(latency);
    }

    /** The prefix's timestamp after the columns: {@code " %5lu.%06lu: "} of guest time {@code nanos}. */
    public static LineBytes appendTimestamp(LineBytes b, long nanos) {
        long t = nanos / 1000;
        if (t < 0) return b.text(String.format(" %5d.%06d: ", t / 1_000_000, t % 1_000_000));
        long seconds = t / 1_000_000;
        return appendTimestamp(b, seconds, (int) (t - seconds * 1_000_000));
    }

    /** The timestamp column of {@code seconds} and {@code micros} (0 to 999,999) of guest time, both not negative. */
    public static LineBytes appendTimestamp(LineBytes b, long seconds, int micros) {
        b.ascii(' ').fill(' ', 5 - LineBytes.digits(seconds)).decimal(seconds).ascii('.');
        return b.fill('0', 6 - LineBytes.digits(micros)).decimal(micros).ascii(':').ascii(' ');
    }

    /** A full {@code trace} line for a kprobe hit at {@code ip} (no trailing newline). */
    public String kprobeLine(TraceContext c, CompiledProbe p, long ip, byte[] data) {
        return contextPrefix(c) + kprobeEvent(p, ip, data);
    }

    /** A full {@code trace} line for a kretprobe: returned to {@code retIp} from {@code func}. */
    public String kretprobeLine(TraceContext c, CompiledProbe p, long func, long retIp, byte[] data) {
        return contextPrefix(c) + kretprobeEvent(p, func, retIp, data);
    }

    /** {@code print_kprobe_event}: {@code EVENT: (sym+0xoff/0xsize) args}. */
    public String kprobeEvent(CompiledProbe p, long ip, byte[] data) {
        return p.definition().event() + ": (" + ipSym(ip, true) + ")" + formatArgs(p, data);
    }

    /** {@code print_kretprobe_event}: {@code EVENT: (ret+0xoff/0xsize <- func) args}. */
    public String kretprobeEvent(CompiledProbe p, long func, long retIp, byte[] data) {
        return p.definition().event() + ": (" + ipSym(retIp, true) + " <- " + ipSym(func, false) + ")"
                + formatArgs(p, data);
    }

    /** {@code seq_print_ip_sym}: {@code 0} for 0; {@link #KRETPROBE_MSG} for the trampoline; with offset {@code sprint_symbol}; without, the bare name or {@code 0x%08lx}. */
    public String ipSym(long ip, boolean withOffset) {
        if (ip == 0) return "0";
        if (kretprobeTrampoline.test(ip)) return KRETPROBE_MSG;
        if (withOffset) return symbols.sprintSymbol(ip);
        return symbols.symbolAt(ip).map(KernelSymbols.Symbol::name).filter(n -> !n.isEmpty())
                .orElse(String.format("0x%08x", ip));
    }

    /** {@code trace_probe_print_args}: {@code " name=value"} for every argument. */
    public String formatArgs(CompiledProbe p, byte[] data) {
        return appendArgs(new LineBytes(64), p, data).toText();
    }

    /** {@link #formatArgs} appended to {@code b} as the guest's bytes. */
    public LineBytes appendArgs(LineBytes b, CompiledProbe p, byte[] data) {
        return appendArgs(b, p, data, data.length);
    }

    /** As above, of an argument area that is {@code data}'s first {@code length} bytes. */
    public LineBytes appendArgs(LineBytes b, CompiledProbe p, byte[] data, int length) {
        for (int i = 0, n = p.argCount(); i < n; i++) {
            FetchArg a = p.arg(i);
            b.ascii(' ').text(a.name()).ascii('=');
            int off = p.argOffset(i);
            if (a.arrayLength() == 0) {
                formatValue(b, a.type(), data, off, length);
            } else {
                b.ascii('{');
                for (int j = 0; j < a.arrayLength(); j++) {
                    formatValue(b, a.type(), data, off + j * a.type().size(), length);
                    b.ascii(j == a.arrayLength() - 1 ? '}' : ',');
                }
            }
        }
        return b;
    }

    /** The arguments of {@code data} typed ({@link EventArg}): what {@link #formatArgs} prints, as values. */
    public List<EventArg> decodeArgs(CompiledProbe p, byte[] data) {
        List<FetchArg> args = p.definition().args();
        java.util.ArrayList<EventArg> out = new java.util.ArrayList<>(args.size());
        for (int i = 0; i < args.size(); i++) {
            FetchArg a = args.get(i);
            int off = p.argOffset(i);
            if (a.arrayLength() == 0) {
                Object v = decodeValue(a.type(), data, off);
                String sym = a.type() == FetchType.SYMBOL ? symbols.sprintSymbol((Long) v) : null;
                out.add(new EventArg(a.name(), a.type(), 0, v, sym));
            } else {
                java.util.ArrayList<Object> l = new java.util.ArrayList<>(a.arrayLength());
                for (int j = 0; j < a.arrayLength(); j++) l.add(decodeValue(a.type(), data, off + j * a.type().size()));
                out.add(new EventArg(a.name(), a.type(), a.arrayLength(), java.util.Collections.unmodifiableList(l), null));
            }
        }
        return out;
    }

    /** One stored value as {@link EventArg} holds it. */
    static Object decodeValue(FetchType type, byte[] data, int off) {
        return switch (type) {
            case S8 -> (long) (byte) CompiledProbe.readField(data, off, 1);
            case S16 -> (long) (short) CompiledProbe.readField(data, off, 2);
            case S32 -> (long) (int) CompiledProbe.readField(data, off, 4);
            case STRING, USTRING, SYMSTR -> {
                int loc = (int) CompiledProbe.readField(data, off, 4);
                int len = loc >>> 16, at = loc & 0xffff;
                if (len == 0) yield null;
                int end = at;
                while (end < data.length && end < at + len && data[end] != 0) end++;
                yield GuestText.decode(data, at, Math.max(0, end - at));
            }
            default -> CompiledProbe.readField(data, off, type.size());
        };
    }

    /**
     * Formats one stored value of {@code type} at {@code off} of an argument area that is
     * {@code data}'s first {@code length} bytes (a string ends there at the latest), as the guest's
     * bytes: a string value is its bytes as fetched.
     */
    public void formatValue(LineBytes b, FetchType type, byte[] data, int off, int length) {
        switch (type) {
            case U8, U16, U32 -> b.decimal(CompiledProbe.readField(data, off, type.size()));
            case U64 -> b.unsigned(CompiledProbe.readField(data, off, 8));
            case S8 -> b.decimal((byte) CompiledProbe.readField(data, off, 1));
            case S16 -> b.decimal((short) CompiledProbe.readField(data, off, 2));
            case S32 -> b.decimal((int) CompiledProbe.readField(data, off, 4));
            case S64 -> b.decimal(CompiledProbe.readField(data, off, 8));
            case X8, X16, X32, X64 -> b.ascii('0').ascii('x').hex(CompiledProbe.readField(data, off, type.size()));
            case CHAR -> b.ascii('\'').raw((int) CompiledProbe.readField(data, off, 1)).ascii('\'');
            case SYMBOL -> b.text(symbols.sprintSymbol(CompiledProbe.readField(data, off, 8)));
            case STRING, USTRING, SYMSTR -> {
                int loc = (int) CompiledProbe.readField(data, off, 4);
                int len = loc >>> 16, at = loc & 0xffff;
                if (len == 0) {
                    b.text("(fault)");
                } else {
                    int end = at;
                    while (end < length && end < at + len && data[end] != 0) end++;
                    if (at > length) throw new StringIndexOutOfBoundsException("offset " + at + ", length " + length);
                    b.ascii('"').bytes(data, at, Math.max(0, end - at)).ascii('"');
                }
            }
        }
    }

    // ---- kprobe_events / kprobe_profile ----------------------------------------------------

    /** The place as {@code kprobe_events} lists it: {@code SYM}, {@code SYM+off} (decimal) or {@code 0x<addr>}. */
    public static String place(ProbeTarget t) {
        return switch (t) {
            case ProbeTarget.SymbolTarget s -> s.offset() != 0 ? s.qualifiedName() + "+" + s.offset() : s.qualifiedName();
            case ProbeTarget.AddressTarget a -> String.format("0x%016x", a.address());
            case ProbeTarget.FileTarget f -> f.path() + ":" + String.format("0x%016x", f.offset());
        };
    }

    /**
     * {@code trace_kprobe_show}: {@code p:GRP/EVENT place name=expr...} ({@code rN:} for return
     * probes). N is the kretprobe's maxactive after registration, which fills in the default
     * (recorded: Linux 6.1 lists {@code r:e f} as {@code r10:kprobes/e f} on one CPU).
     */
    public static String listing(TraceProbe p) { return listing(p, Kprobes.DEFAULT_MAXACTIVE); }

    /**
     * {@link #listing(TraceProbe)} on a machine whose default {@code maxactive} is
     * {@code defaultMaxactive} ({@link Kprobes#defaultMaxactive()}: 10 up to 5 CPUs, 2N above).
     */
    public static String listing(TraceProbe p, int defaultMaxactive) {
        if (p instanceof WprobeDef w) return w.wprobeListing();
        StringBuilder sb = new StringBuilder();
        if (p instanceof FprobeDef f) {          // trace_fprobe_show
            sb.append(f.tracepoint() ? 't' : 'f');
            if (f.exit() && f.maxactive() != 0) sb.append(f.maxactive());
            sb.append(':').append(p.group()).append('/').append(p.event()).append(' ').append(f.symbol()).append(f.exit() ? "%return" : "");
            for (FetchArg a : p.args()) sb.append(' ').append(a.name()).append('=').append(a.expression());
            return sb.toString();
        }
        sb.append(p.isReturn() ? 'r' : 'p');
        if (p instanceof KretprobeDef r) sb.append(r.maxactive() != 0 ? r.maxactive() : defaultMaxactive);
        sb.append(':').append(p.group()).append('/').append(p.event()).append(' ').append(place(p.target()));
        for (FetchArg a : p.args()) sb.append(' ').append(a.name()).append('=').append(a.expression());
        return sb.toString();
    }

    /** One {@code kprobe_profile} line: {@code "  %-44s %15lu %15lu"} (no trailing newline). */
    public static String profileLine(String event, long hits, long misses) {
        return String.format("  %-44s %15s %15s", event, Long.toUnsignedString(hits), Long.toUnsignedString(misses));
    }

    // ---- events/<grp>/<event>/format ------------------------------------------------------

    private static String field(String type, String name, int offset, int size, boolean signed) {
        int br = type.indexOf('[');
        if (br >= 0 && !type.startsWith("__data_loc"))
            return String.format("\tfield:%s %s%s;\toffset:%d;\tsize:%d;\tsigned:%d;\n",
                    type.substring(0, br), name, type.substring(br), offset, size, signed ? 1 : 0);
        return String.format("\tfield:%s %s;\toffset:%d;\tsize:%d;\tsigned:%d;\n", type, name, offset, size, signed ? 1 : 0);
    }

    /** The {@code format} file of the event, with trace-event id {@code id}. */
    public static String formatFile(CompiledProbe p, int id) {
        TraceProbe d = p.definition();
        StringBuilder sb = new StringBuilder();
        sb.append("name: ").append(d.event()).append('\n');
        sb.append("ID: ").append(id).append('\n');
        sb.append("format:\n");
        sb.append(field("unsigned short", "common_type", 0, 2, false));
        sb.append(field("unsigned char", "common_flags", 2, 1, false));
        sb.append(field("unsigned char", "common_preempt_count", 3, 1, false));
        sb.append(field("int", "common_pid", 4, 4, true));
        sb.append('\n');
        int base = CompiledProbe.COMMON_SIZE;
        if (d.isReturn()) {
            sb.append(field("unsigned long", "__probe_func", base, 8, false));
            sb.append(field("unsigned long", "__probe_ret_ip", base + 8, 8, false));
        } else {
            sb.append(field("unsigned long", "__probe_ip", base, 8, false));
        }
        int argBase = base + p.probeHeaderSize();
        List<FetchArg> args = d.args();
        for (int i = 0; i < args.size(); i++) {
            FetchArg a = args.get(i);
            sb.append(field(a.fieldType(), a.name(), argBase + p.argOffset(i), a.fieldSize(), a.type().signed()));
        }
        sb.append("\nprint fmt: ").append(printFmt(d)).append('\n');
        return sb.toString();
    }

    /** {@code __set_print_fmt}. */
    public static String printFmt(TraceProbe d) {
        StringBuilder sb = new StringBuilder("\"");
        sb.append(d.isReturn() ? "(%lx <- %lx)" : "(%lx)");
        for (FetchArg a : d.args()) {
            sb.append(' ').append(a.name()).append('=');
            String f = a.type().printFmt();
            if (a.arrayLength() > 0) {
                sb.append('{').append(f);
                for (int j = 1; j < a.arrayLength(); j++) sb.append(',').append(f);
                sb.append('}');
            } else {
                sb.append(f);
            }
        }
        sb.append('"').append(d.isReturn() ? ", REC->__probe_func, REC->__probe_ret_ip" : ", REC->__probe_ip");
        for (FetchArg a : d.args()) {
            boolean str = a.type().isString();
            if (a.arrayLength() > 0) {
                for (int j = 0; j < a.arrayLength(); j++)
                    sb.append(str ? ", __get_str(" + a.name() + "[" + j + "])" : ", REC->" + a.name() + "[" + j + "]");
            } else {
                sb.append(str ? ", __get_str(" + a.name() + ")" : ", REC->" + a.name());
            }
        }
        return sb.toString();
    }
}
