package dev.kpemu.kprobes.events;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfKind;
import dev.kpemu.image.btf.BtfType;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

import static dev.kpemu.kprobes.events.FetchProgram.*;

/**
 * Parses {@code kprobe_events} commands exactly as Linux does (by default Linux 6.1, the
 * kernel of kpemu's Debian guests): the same grammar, the same order of checks, the same
 * {@code error_log} messages and caret positions, the same limits.
 *
 * <p>Follows {@code trace_parse_run_command} (comments, lines), {@code dyn_event_release}
 * (delete), {@code __trace_kprobe_create} (place, maxactive, event name) and
 * {@code traceprobe_parse_probe_arg} (fetch arguments, including the 16-slot fetch
 * program whose exhaustion gives "Dereference is too much nested").
 *
 * <p>A parser is immutable and thread-safe; each call works on its own state.
 */
public final class ProbeParser {
    /** {@code MAX_TRACE_ARGS}. */
    public static final int MAX_TRACE_ARGS = 128;
    /** {@code MAX_EVENT_NAME_LEN}. */
    public static final int MAX_EVENT_NAME_LEN = 64;
    /** {@code MAX_ARG_NAME_LEN}. */
    public static final int MAX_ARG_NAME_LEN = 32;
    /** {@code MAX_ARGSTR_LEN}: the longest argument expression. */
    public static final int MAX_ARGSTR_LEN = 63;
    /** {@code MAX_ARRAY_LEN}. */
    public static final int MAX_ARRAY_LEN = 64;
    /** {@code FETCH_INSN_MAX}. */
    public static final int FETCH_INSN_MAX = 16;
    /** {@code KRETPROBE_MAXACTIVE_MAX}. */
    public static final int KRETPROBE_MAXACTIVE_MAX = 4096;
    /** {@code WRITE_BUFSIZE}: a line may hold at most WRITE_BUFSIZE - 2 bytes. */
    public static final int WRITE_BUFSIZE = 4096;
    /** {@code MAX_PROBE_EVENT_SIZE}: the fixed part of an event's arguments (6.10+ checks it). */
    public static final int MAX_PROBE_EVENT_SIZE = 3072;
    /** {@code MAX_BTF_ARGS_LEN}: the buffer {@code $arg*} and {@code $argN} expand into. */
    public static final int MAX_BTF_ARGS_LEN = 128;
    /** {@code KPROBE_EVENT_SYSTEM}. */
    public static final String DEFAULT_GROUP = "kprobes";

    private static final List<String> RESERVED_FIELD_NAMES = List.of("common_type", "common_flags",
            "common_preempt_count", "common_pid", "common_tgid", "__probe_ip", "__probe_ret_ip", "__probe_func");

    private final RegisterSet regs;
    private final Dialect dialect;
    private final KernelSymbols symbols;

    /** A Linux 6.1 parser for {@code arch} that accepts every symbol name (syntax only). */
    public ProbeParser(Arch arch) {
        this(arch, Dialect.LINUX_6_1, KernelSymbols.permissive());
    }

    public ProbeParser(Arch arch, Dialect dialect, KernelSymbols symbols) {
        this.regs = RegisterSet.of(Objects.requireNonNull(arch));
        this.dialect = Objects.requireNonNull(dialect);
        this.symbols = Objects.requireNonNull(symbols);
    }

    public Arch arch() { return regs.arch(); }

    public Dialect dialect() { return dialect; }

    public RegisterSet registers() { return regs; }

    /**
     * Parses every line of {@code text} as one write to {@code kprobe_events} would, stopping
     * at the first rejected line (the kernel stops there too). Blank and comment lines yield
     * nothing.
     */
    public List<ProbeDefinition> parseAll(String text) throws ProbeSyntaxException {
        List<ProbeDefinition> out = new ArrayList<>();
        for (String line : text.split("\n", -1)) {
            ProbeDefinition d = parse(line);
            if (d != null) out.add(d);
        }
        return out;
    }

    /**
     * Parses one command line. Returns null for a blank or comment-only line.
     *
     * @throws ProbeSyntaxException with the kernel's error_log entry and errno
     */
    public ProbeDefinition parse(String line) throws ProbeSyntaxException {
        String b = Bytes.encode(line);
        int nul = b.indexOf('\0');
        if (nul >= 0) b = b.substring(0, nul);
        if (b.length() > WRITE_BUFSIZE - 2)
            throw ProbeSyntaxException.silent(line, Errno.EINVAL,
                    "Line length is too long: Should be less than " + (WRITE_BUFSIZE - 2));
        int hash = b.indexOf('#');
        if (hash >= 0) b = b.substring(0, hash);
        List<String> argv = Bytes.argvSplit(b);
        if (!b.isEmpty() && b.charAt(0) == '-') return parseDelete(argv);
        if (argv.isEmpty()) return null;
        return new Command(argv).parse();
    }

    /**
     * A uprobe's fetch arguments ({@code argv} from index 2) as {@code __trace_uprobe_create}
     * parses them: {@code TPARG_FL_USER}, with {@code TPARG_FL_RETURN} for a return probe.
     * Errors are logged by {@code trace_uprobe}.
     */
    List<FetchArg> parseUprobeArgs(List<String> argv, boolean isReturn) throws ProbeSyntaxException {
        Command c = new Command(argv);
        c.user = true;
        c.isReturn = isReturn;
        return c.parseArgs(argv.subList(2, argv.size()));
    }

    /** {@code traceprobe_parse_event_name} on {@code argv[0]}'s text after {@code "p:"}, for a uprobe: {group or null, event or null}. */
    String[] parseUprobeEventName(List<String> argv, String event, int offset) throws ProbeSyntaxException {
        Command c = new Command(argv);
        c.user = true;
        return c.parseEventName(event, offset);
    }

    static DeleteDef parseDelete(List<String> argv) throws ProbeSyntaxException {
        String cmd = Bytes.decode(String.join(" ", argv));
        String a0 = argv.get(0);
        if (a0.length() < 2 || a0.charAt(1) != ':')
            throw ProbeSyntaxException.silent(cmd, Errno.EINVAL, "delete command must start with '-:'");
        String event = a0.substring(2);
        String group = null;
        int slash = event.indexOf('/');
        if (slash >= 0) {
            group = event.substring(0, slash);
            event = event.substring(slash + 1);
        }
        if (group == null && event.isEmpty())
            throw ProbeSyntaxException.silent(cmd, Errno.EINVAL, "no event to delete");
        List<String> filter = new ArrayList<>();
        for (int i = 1; i < argv.size(); i++) filter.add(Bytes.decode(argv.get(i)));
        return new DeleteDef(group == null ? null : Bytes.decode(group), Bytes.decode(event), filter, cmd);
    }

    /** The state of parsing one create command. */
    private final class Command {
        final List<String> argv;
        final String cmd;
        int index;
        // fetch-arg flags
        boolean isReturn;     // TPARG_FL_RETURN
        boolean fentry;       // TPARG_FL_FENTRY
        boolean fprobe;       // TPARG_FL_FPROBE: an fprobe or tracepoint probe (no registers)
        boolean tpoint;       // TPARG_FL_TPOINT: a tracepoint probe (the probestub's first parameter is hidden)
        boolean user;         // TPARG_FL_USER: a uprobe (no TPARG_FL_KERNEL: neither function entry nor exit)
        boolean wprobe;       // TPARG_FL_WPROBE: a wprobe ($addr)
        String function;      // the probed symbol (for BTF), or null for an address
        // current fetch program
        Insn[] code;
        int cur;
        // BTF (traceprobe_parse_context): the function's prototype once found, the last type
        // a BTF argument or member had, its bit offset and bitfield width, the error offset
        BtfFunction btf;
        BtfType lastType;
        long lastBitoffs;
        int lastBitsize;
        int ctxOffset;
        /** {@code tp->entry_arg}: the parameters a return probe saves at entry, one word each. */
        final List<Integer> entryArgs = new ArrayList<>();

        Command(List<String> argv) {
            this.argv = argv;
            this.cmd = Bytes.decode(String.join(" ", argv));
        }

        ProbeSyntaxException err(int offset, KernelError e) {
            return err(offset, e, Errno.EINVAL);
        }

        ProbeSyntaxException err(int offset, KernelError e, Errno errno) {
            ProbeSyntaxException x = ProbeSyntaxException.at(argv, index, offset, e, errno);
            return fprobe ? x.from(FprobeDef.SUBSYSTEM) : wprobe ? x.from(WprobeDef.SUBSYSTEM)
                    : user ? x.from(UprobeParser.SUBSYSTEM) : x;
        }

        ProbeSyntaxException silent(String why) {
            return ProbeSyntaxException.silent(cmd, Errno.EINVAL, why);
        }

        ProbeDefinition parse() throws ProbeSyntaxException {
            String a0 = argv.get(0);
            char kind = a0.charAt(0);
            if ((kind == 'f' || kind == 't') && dialect.hasFprobeEvents() && symbols.hasFprobeEvents()) return parseFprobe();
            if (kind == 'w') return parseWprobe();          // kpemu's extension on every dialect
            if (kind != 'p' && kind != 'r') throw unmatched("not a kprobe command");
            if (argv.size() < 2) throw silent("a kprobe command needs a place");
            boolean ret = kind == 'r';
            index = 0;
            int colon = a0.indexOf(':', 1);
            String event = colon >= 0 ? a0.substring(colon + 1) : null;

            int maxactive = 0;
            if (a0.length() > 1 && Bytes.isDigit(a0.charAt(1))) {
                if (!ret) throw err(1, dialect.badMaxactTypeName ? KernelError.BAD_MAXACT_TYPE : KernelError.MAXACT_NO_KPROBE);
                int len = event != null ? colon - 1 : a0.length() - 1;
                if (len > MAX_EVENT_NAME_LEN - 1) throw err(1, KernelError.BAD_MAXACT);
                Long m = Bytes.kstrtouint(a0.substring(1, 1 + len), 0);
                if (m == null || m == 0) throw err(1, KernelError.BAD_MAXACT);
                if (m > KRETPROBE_MAXACTIVE_MAX) throw err(1, KernelError.MAXACT_TOO_BIG);
                maxactive = (int) (long) m;
            }

            String place = argv.get(1);
            ProbeTarget target;
            String symbol = null;
            long offset = 0;
            boolean returnSuffix = false;
            Long addr = Bytes.kstrtoull(place, 0);
            if (addr == null) {
                index = 1;
                if (place.indexOf('/') >= 0 && place.indexOf(':') >= 0) throw silent("uprobe place");
                String sym = place;
                int pct = sym.indexOf('%');
                if (pct >= 0) {
                    if (sym.substring(pct).equals("%return")) {
                        sym = sym.substring(0, pct);
                        ret = true;
                        returnSuffix = true;
                    } else {
                        throw err(pct, KernelError.BAD_ADDR_SUFFIX);
                    }
                }
                int cut = -1;
                for (int i = 0; i < sym.length(); i++) {
                    char c = sym.charAt(i);
                    if (c == '+' || c == '-') { cut = i; break; }
                }
                if (cut >= 0) {
                    Long o = Bytes.kstrtoll(sym.substring(cut), 0);
                    if (o == null) throw err(0, KernelError.BAD_PROBE_ADDR);
                    offset = o;
                    sym = sym.substring(0, cut);
                }
                if (offset < 0 || offset > 0xFFFF_FFFFL) throw err(0, KernelError.BAD_PROBE_ADDR);
                isReturn = ret;
                KernelSymbols.FuncEntry fe = symbols.funcEntry(Bytes.decode(sym), offset);
                fentry = fe == KernelSymbols.FuncEntry.ENTRY && !ret;
                if (fe == KernelSymbols.FuncEntry.NOT_ENTRY && ret) throw err(0, KernelError.BAD_RETPROBE);
                if (sym.indexOf(':') < 0) {
                    int n = symbols.countSymbols(Bytes.decode(sym));
                    // validate_probe_symbol, then parse_error: EINVAL (recorded on 6.12 and 7.2)
                    if (n > 1) throw err(0, KernelError.NON_UNIQ_SYMBOL, dialect.btfArgs ? Errno.EINVAL : Errno.EADDRNOTAVAIL);
                    if (n == 0) throw err(0, KernelError.BAD_PROBE_ADDR, dialect.btfArgs ? Errno.EINVAL : Errno.ENOENT);
                }
                symbol = sym;
                function = Bytes.decode(sym);
                int mc = sym.indexOf(':');
                target = new ProbeTarget.SymbolTarget(mc >= 0 ? Bytes.decode(sym.substring(0, mc)) : null,
                        Bytes.decode(sym.substring(mc + 1)), offset);
            } else {
                target = new ProbeTarget.AddressTarget(addr);
            }

            index = 0;
            String group = DEFAULT_GROUP;
            String name = null;
            if (event != null) {
                String[] ge = parseEventName(event, colon + 1);
                if (ge[0] != null) group = ge[0];
                name = ge[1];
            }
            if (name == null) {
                String gen = symbol != null
                        ? (ret ? "r_" : "p_") + symbol + "_" + offset
                        : String.format("%c_0x%016x", ret ? 'r' : 'p', addr);
                name = generatedEventName(gen);
            }

            List<FetchArg> args = parseArgs(argv.subList(2, argv.size()));
            String grp = Bytes.decode(group), ev = Bytes.decode(name);
            if (ret) return new KretprobeDef(grp, ev, target, maxactive, returnSuffix, args, cmd);
            return new KprobeDef(grp, ev, target, fentry, args, cmd);
        }

        /** The fetch arguments: {@code $arg*}/{@code $argN} and {@code :%pd}/{@code :%pD} expanded (BTF kernels), then each parsed. */
        List<FetchArg> parseArgs(List<String> raw) throws ProbeSyntaxException {
            if (dialect.btfArgs && !user) {     // trace_uprobe expands no meta-arguments
                raw = expandMetaArgs(raw);
                if (raw.size() > MAX_TRACE_ARGS) {
                    index = 2;
                    if (dialect.tooManyArgsError) throw err(0, KernelError.TOO_MANY_ARGS, Errno.E2BIG);
                    throw ProbeSyntaxException.silent(cmd, Errno.E2BIG, "more than " + MAX_TRACE_ARGS + " arguments");
                }
                raw = expandDentryArgs(raw);
            } else if (dialect.tooManyArgsError && !user && raw.size() > MAX_TRACE_ARGS) {
                index = 2;
                throw err(0, KernelError.TOO_MANY_ARGS, Errno.E2BIG);
            }
            List<FetchArg> args = new ArrayList<>();
            int size = 0;
            for (int i = 0; i < raw.size() && i < MAX_TRACE_ARGS; i++) {
                index = i + 2;
                FetchArg a = parseArg(i, raw.get(i), args);
                size += a.fieldSize();
                if (dialect.btfArgs && size > MAX_PROBE_EVENT_SIZE) throw err(ctxOffset, KernelError.EVENT_TOO_BIG, Errno.E2BIG);
                args.add(a);
            }
            return args;
        }

        /**
         * A command no dynamic event type takes (each returns -ECANCELED): EINVAL, and from 6.15
         * {@code create_dyn_event} logs it (recorded on 7.2: {@code dynevent: error: No matching
         * dynamic event type}, caret at 0).
         */
        ProbeSyntaxException unmatched(String why) {
            if (!dialect.logsUnmatchedDynamicEvent()) return silent(why);
            index = 0;
            return ProbeSyntaxException.at(argv, 0, 0, KernelError.NO_DYNEVENT, Errno.EINVAL).from("dynevent");
        }

        /**
         * {@code __trace_fprobe_create} (Linux 6.4+): {@code f[:[GRP/][EVENT]] KSYM[%return] [FETCHARGS]}
         * and {@code t[:[GRP/][EVENT]] TRACEPOINT [FETCHARGS]}, in the kernel's order of checks. The
         * function is not looked up here: it is an ftrace filter, checked when the fprobe registers
         * ({@link ProbeSites}); a tracepoint no code defines is kept for a module to come, its
         * arguments then without BTF.
         */
        ProbeDefinition parseFprobe() throws ProbeSyntaxException {
            String a0 = argv.get(0);
            boolean tp = a0.charAt(0) == 't';
            if (argv.size() < 2) throw unmatched("an fprobe command needs a place");
            fprobe = true;
            tpoint = tp;
            index = 0;
            String group = tp ? FprobeDef.TRACEPOINT_GROUP : FprobeDef.FPROBE_GROUP;
            int colon = a0.indexOf(':', 1);
            String event = colon >= 0 ? a0.substring(colon + 1) : null;
            int maxactive = 0;
            if (a0.length() > 1 && Bytes.isDigit(a0.charAt(1))) {
                int len = event != null ? colon - 1 : a0.length() - 1;
                if (len > MAX_EVENT_NAME_LEN - 1) throw err(1, KernelError.BAD_MAXACT);
                Long m = Bytes.kstrtouint(a0.substring(1, 1 + len), 0);
                if (m == null || m == 0) throw err(1, KernelError.BAD_MAXACT);
                if (m > KRETPROBE_MAXACTIVE_MAX) throw err(1, KernelError.MAXACT_TOO_BIG);
                maxactive = (int) (long) m;
            }
            index = 1;                                     // parse_symbol_and_return
            String place = argv.get(1);
            String sym = place;
            boolean ret = false;
            int pct = place.indexOf('%');
            if (pct >= 0) {
                if (!tp && place.substring(pct).equals("%return")) ret = true;
                else throw err(pct, KernelError.BAD_ADDR_SUFFIX);
                sym = place.substring(0, pct);
            }
            if (!ret) {
                if (tp) {
                    for (int k = 0; k < sym.length(); k++) {
                        char c = sym.charAt(k);
                        if (!(Bytes.isAlpha(c) || Bytes.isDigit(c) || c == '_')) throw err(k, KernelError.BAD_TP_NAME);
                    }
                }
                for (int i = 2; i < argv.size(); i++) {     // a $retval makes it a return fprobe
                    String a = argv.get(i);
                    int at = a.indexOf("$retval");
                    if (at < 0) continue;
                    char after = Bytes.charAt(a, at + 7);
                    if (Bytes.isAlpha(after) || Bytes.isDigit(after) || after == '_') continue;
                    if (tp) {
                        index = i;
                        throw err(at, KernelError.RETVAL_ON_PROBE);
                    }
                    ret = true;
                    break;
                }
            }
            if (!ret && maxactive != 0) {
                index = 0;
                throw err(1, KernelError.BAD_MAXACT_TYPE);
            }
            index = 0;
            String name = null;
            if (event != null) {
                String[] ge = parseEventName(event, colon + 1);
                if (ge[0] != null) group = ge[0];
                name = ge[1];
            }
            if (name == null) {
                name = generatedEventName(tp ? (Bytes.isDigit(Bytes.charAt(sym, 0)) ? "_" : "") + sym : sym + "__" + (ret ? "exit" : "entry"));
            }
            isReturn = ret;
            fentry = !ret;
            String decoded = Bytes.decode(sym);
            // ctx.funcname: the tracepoint's probestub when the tracepoint exists, else the name itself
            function = tp && symbols.hasTracepoint(decoded) ? FprobeDef.probestub(decoded) : decoded;
            List<FetchArg> args = parseArgs(argv.subList(2, argv.size()));
            return new FprobeDef(Bytes.decode(group), Bytes.decode(name), decoded, tp, ret, maxactive, args, cmd);
        }

        /**
         * {@code __trace_wprobe_create} and {@code parse_address_spec} (linux-next):
         * {@code w[:[GRP/][EVENT]] [r|w|rw]@ADDR|SYM[+|-OFFS][:LEN] [FETCHARGS]}, in the kernel's order
         * of checks. The symbol is resolved here, as Linux's {@code kallsyms_lookup_name} does;
         * kpemu's extension: any length from 1 to {@link WprobeDef#MAX_LENGTH} (Linux: 1, 2, 4, 8,
         * aligned).
         */
        ProbeDefinition parseWprobe() throws ProbeSyntaxException {
            String a0 = argv.get(0);
            wprobe = true;
            index = 0;
            if (argv.size() < 2) throw err(0, KernelError.NO_ARG_BODY);
            String event = null;
            if (a0.length() > 1) {
                if (a0.charAt(1) != ':') throw err(1, KernelError.BAD_MAXACT_TYPE);
                event = a0.substring(2);
            }
            index = 1;
            String spec = argv.get(1);
            int at = spec.indexOf('@');
            int col = spec.indexOf(':');
            if (at < 0) throw err(0, KernelError.BAD_ACCESS_FMT);
            boolean reads = true, writes = true;
            if (at > 0) {
                switch (spec.substring(0, at)) {
                    case "r" -> writes = false;
                    case "w" -> reads = false;
                    case "rw" -> { }
                    default -> throw err(0, KernelError.BAD_ACCESS_TYPE);
                }
            }
            long length = WprobeDef.DEFAULT_LENGTH;
            String place = spec.substring(at + 1);
            if (col >= 0) {
                Long l = Bytes.kstrtoll(spec.substring(col + 1), 0);
                if (l == null || l < 1 || l > WprobeDef.MAX_LENGTH) throw err(col + 1, KernelError.BAD_ACCESS_LEN);
                length = l;
                if (col > at) place = spec.substring(at + 1, col);
            }
            String symbol = null;
            long offset = 0;
            Long addr = Bytes.kstrtoull(place, 0);
            if (addr == null) {
                String sym = place;
                int cut = -1;
                for (int i = 0; i < sym.length(); i++) {
                    char c = sym.charAt(i);
                    if (c == '+' || c == '-') { cut = i; break; }
                }
                if (cut >= 0) {
                    Long o = Bytes.kstrtoll(sym.substring(cut), 0);
                    if (o == null || o != (int) (long) o) throw err(at + 1 + cut, KernelError.BAD_PROBE_ADDR);
                    offset = o;
                    sym = sym.substring(0, cut);
                }
                symbol = Bytes.decode(sym);
                java.util.OptionalLong a = symbols.lookupDataName(symbol);
                // a table without addresses (syntax checks) knows the name but not where it is: 0
                if ((a.isEmpty() || a.getAsLong() == 0) && symbols.countSymbols(symbol) == 0)
                    throw err(at + 1, KernelError.BAD_ACCESS_ADDR, Errno.ENOENT);
                addr = a.isPresent() ? a.getAsLong() + offset : 0;
            }
            boolean linuxLength = length == 1 || length == 2 || length == 4 || length == 8;
            if (linuxLength && addr != 0 && (addr & (length - 1)) != 0) throw err(at + 1, KernelError.BAD_ACCESS_ADDR);
            index = 0;
            String group = WprobeDef.GROUP;
            String name = null;
            if (event != null) {
                String[] ge = parseEventName(event, 2);
                if (ge[0] != null) group = ge[0];
                name = ge[1];
            }
            if (name == null) name = sanitizedEventName(symbol != null ? symbol : "w_0x" + Long.toHexString(addr));
            List<FetchArg> args = parseArgs(argv.subList(2, argv.size()));
            return new WprobeDef(Bytes.decode(group), Bytes.decode(name), reads, writes, symbol, offset, addr, length, args, cmd);
        }

        /** {@code sanitize_event_name} on a name cut to {@code MAX_EVENT_NAME_LEN - 1}: every character not of a C identifier made {@code _}. */
        static String sanitizedEventName(String gen) {
            if (gen.length() > MAX_EVENT_NAME_LEN - 1) gen = gen.substring(0, MAX_EVENT_NAME_LEN - 1);
            char[] cs = gen.toCharArray();
            for (int i = 0; i < cs.length; i++) if (!(Bytes.isAlpha(cs[i]) || Bytes.isDigit(cs[i]) || cs[i] == '_')) cs[i] = '_';
            return new String(cs);
        }

        /**
         * An automatic event name as the kernel makes it: cut to {@code MAX_EVENT_NAME_LEN - 1}
         * characters, then every {@code :} and {@code .} after the first character made {@code _}.
         */
        static String generatedEventName(String gen) {
            if (gen.length() > MAX_EVENT_NAME_LEN - 1) gen = gen.substring(0, MAX_EVENT_NAME_LEN - 1);
            char[] cs = gen.toCharArray();
            for (int i = 1; i < cs.length; i++) if (cs[i] == ':' || cs[i] == '.') cs[i] = '_';
            return new String(cs);
        }

        /** {@code traceprobe_parse_event_name}: {group or null, event or null (auto)}. */
        String[] parseEventName(String event, int offset) throws ProbeSyntaxException {
            String group = null;
            int slash = event.indexOf('/');
            if (slash < 0) slash = event.indexOf('.');
            if (slash >= 0) {
                if (slash == 0) throw err(offset, KernelError.NO_GROUP_NAME);
                if (slash + 1 > MAX_EVENT_NAME_LEN) throw err(offset, KernelError.GROUP_TOO_LONG);
                group = event.substring(0, slash);
                boolean good = dialect != Dialect.LINUX_6_1 ? Bytes.isGoodSystemName(group) : Bytes.isGoodName(group);
                if (!good) throw err(offset, KernelError.BAD_GROUP_NAME);
                offset += slash + 1;
                event = event.substring(slash + 1);
            }
            if (event.isEmpty()) {
                if (slash >= 0) return new String[] {group, null};
                throw err(offset, KernelError.NO_EVENT_NAME);
            } else if (event.length() > MAX_EVENT_NAME_LEN - 1) {   // recorded: Debian's 6.1.192 refuses 64 characters too (uprobes.error_log)
                throw err(offset, KernelError.EVENT_TOO_LONG);
            }
            if (!Bytes.isGoodName(event)) throw err(offset, KernelError.BAD_EVENT_NAME);
            return new String[] {group, event};
        }

        /** {@code traceprobe_parse_probe_arg}. */
        FetchArg parseArg(int i, String arg, List<FetchArg> previous) throws ProbeSyntaxException {
            int eq = arg.indexOf('=');
            String name, body;
            int bodyOffset;
            if (eq >= 0) {
                if (eq > MAX_ARG_NAME_LEN) throw err(0, KernelError.ARG_NAME_TOO_LONG);
                if (eq == 0) throw err(0, KernelError.NO_ARG_NAME);
                name = arg.substring(0, eq);
                body = arg.substring(eq + 1);
                bodyOffset = eq + 1;
            } else {
                name = generatedName(arg, i);
                body = arg;
                bodyOffset = 0;
            }
            if (!Bytes.isGoodName(name)) throw err(0, KernelError.BAD_ARG_NAME);
            if (RESERVED_FIELD_NAMES.contains(name)) throw err(0, KernelError.USED_ARG_NAME);
            for (FetchArg p : previous) if (p.name().equals(Bytes.decode(name))) throw err(0, KernelError.USED_ARG_NAME);
            return parseBody(Bytes.decode(name), body, bodyOffset);
        }

        /** {@code traceprobe_parse_probe_arg_body}. */
        FetchArg parseBody(String name, String body, int offset) throws ProbeSyntaxException {
            if (body.length() > MAX_ARGSTR_LEN) throw err(offset, KernelError.ARG_TOO_LONG, dialect.btfArgs ? Errno.E2BIG : Errno.EINVAL);
            if (body.isEmpty()) throw err(offset, KernelError.NO_ARG_BODY);

            String arg = body;
            String t = null;          // type text (without array suffix)
            int tPos = 0;             // position of t inside body
            int count = 0;
            int colon = body.indexOf(':');
            if (colon >= 0) {
                arg = body.substring(0, colon);
                tPos = colon + 1;
                t = body.substring(tPos);
                int lb = t.indexOf('[');
                if (lb >= 0) {
                    int t2 = tPos + lb + 1;         // array size text position in body
                    String rest = body.substring(t2);
                    t = t.substring(0, lb);
                    int rb = rest.indexOf(']');
                    if (rb < 0) throw err(offset + body.length(), KernelError.ARRAY_NO_CLOSE);
                    if (rb + 1 < rest.length()) throw err(offset + t2 + rb + 1, KernelError.BAD_ARRAY_SUFFIX);
                    Long c = Bytes.kstrtouint(rest.substring(0, rb), 0);
                    if (c == null || c == 0) throw err(offset + t2, KernelError.BAD_ARRAY_NUM);
                    if (c > MAX_ARRAY_LEN) throw err(offset + t2, KernelError.ARRAY_TOO_BIG);
                    count = (int) (long) c;
                }
            }
            int typeOff = offset + (t != null ? tPos : 0);

            FetchType type;
            Bitfield bitfield = null;
            if (arg.equals("$comm") || arg.equals("$COMM") || arg.startsWith("\\\"")) {
                if (count != 0 || (t != null && !t.equals("string"))) {
                    if (dialect.needStringTypeError) throw err(typeOff, KernelError.NEED_STRING_TYPE);
                    throw silent("$comm and immediate strings only take the string type");
                }
                type = FetchType.STRING;
            } else {
                type = findFetchType(t);
            }
            if (type == null) throw err(typeOff, KernelError.BAD_TYPE);

            code = new Insn[FETCH_INSN_MAX];
            for (int k = 0; k < code.length; k++) code[k] = new Insn();
            code[FETCH_INSN_MAX - 1].op = END;
            cur = 0;
            lastType = null;
            ctxOffset = offset;
            FetchExpr expr = parseProbeArg(arg, offset);
            // where the checks after the fetch's parse put their caret (the context's offset on 6.6+)
            int after = dialect == Dialect.LINUX_6_1 ? offset : ctxOffset;
            typeOff = after + (t != null ? tPos : 0);
            boolean btfTyped = false;
            if (dialect.btfArgs && lastType != null) {
                if (t == null) {
                    int[] bf = {lastBitsize, (int) lastBitoffs};
                    FetchType bt = BtfFunction.fetchType(lastType, bf);
                    lastBitsize = bf[0];
                    lastBitoffs = bf[1];
                    type = bt != null ? bt : FetchType.DEFAULT;
                    btfTyped = true;
                } else if (t.contains("string")) {
                    prepareBtfStringFetch(t);
                }
            }

            boolean dynamic = false;
            if (type.isString()) {
                int op = code[cur].op;
                if (type == FetchType.SYMSTR) {
                    if (op != REG && op != STACK && op != RETVAL && op != ARG && op != DEREF)
                        throw err(typeOff, KernelError.BAD_SYMSTRING);
                } else if (op != DEREF && op != UDEREF && op != IMM && op != COMM && op != DATA) {
                    throw err(typeOff, KernelError.BAD_STRING);
                }
                if (type == FetchType.SYMSTR || op == IMM || op == COMM || op == DATA || count != 0) {
                    cur++;
                    if (code[cur].op != NOP) throw err(offset, KernelError.TOO_MANY_OPS);
                }
                if (type == FetchType.USTRING || code[cur].op == UDEREF) code[cur].op = ST_USTRING;
                else if (type == FetchType.SYMSTR) code[cur].op = ST_SYMSTR;
                else code[cur].op = ST_STRING;
                code[cur].size = type.size();
                dynamic = true;
            } else if (code[cur].op == DEREF) {
                code[cur].op = ST_MEM;
                code[cur].size = type.size();
            } else if (code[cur].op == UDEREF) {
                code[cur].op = ST_UMEM;
                code[cur].size = type.size();
            } else {
                cur++;
                if (code[cur].op != NOP) throw err(offset, KernelError.TOO_MANY_OPS);
                code[cur].op = ST_RAW;
                code[cur].size = type.size();
            }
            int scode = cur;
            if (t != null && !t.isEmpty() && t.charAt(0) == 'b') {
                bitfield = parseBitfield(t, type);
                if (bitfield == null) throw err(after + tPos, KernelError.BAD_BITFIELD);
            } else if (t == null && dialect.btfArgs && lastType != null && (lastBitsize % 8 != 0 || lastBitoffs != 0)) {
                // parse_btf_bitfield: a 64-bit modifier whatever the stored type
                cur++;
                if (code[cur].op != NOP) throw err(ctxOffset, KernelError.TOO_MANY_OPS);
                bitfield = new Bitfield(lastBitsize, lastBitoffs, 64);
                code[cur].op = MOD_BF;
                code[cur].lshift = (int) (64 - (lastBitsize + lastBitoffs));
                code[cur].rshift = 64 - lastBitsize;
                code[cur].basesize = 8;
            }
            if (count != 0) {
                int sop = code[scode].op;
                if (sop != ST_MEM && sop != ST_STRING && sop != ST_USTRING)
                    throw err(typeOff, KernelError.BAD_STRING);
                cur++;
                if (code[cur].op != NOP) throw err(offset, KernelError.TOO_MANY_OPS);
                code[cur].op = LP_ARRAY;
                code[cur].param = count;
            }
            cur++;
            code[cur].op = END;
            FetchProgram program = new FetchProgram(Arrays.copyOf(code, cur + 1), dynamic, type.size());
            return new FetchArg(name, Bytes.decode(body), expr, type, bitfield, count, program);
        }

        /** {@code find_fetch_type}; bitfields map to their container type. */
        FetchType findFetchType(String t) {
            if (t == null) return FetchType.DEFAULT;
            if (!t.isEmpty() && t.charAt(0) == 'b') {
                int slash = t.indexOf('/');
                if (slash < 0) return null;
                Long bs = Bytes.kstrtoull(t.substring(slash + 1), 0);
                if (bs == null) return null;
                if (bs == 8) return FetchType.U8;
                if (bs == 16) return FetchType.U16;
                if (bs == 32) return FetchType.U32;
                if (bs == 64) return FetchType.U64;
                return null;
            }
            FetchType type = FetchType.byName(t, dialect);
            // 6.2+ find_fetch_type: no symbol types on a uprobe (recorded: 6.1 takes them)
            if (user && dialect != Dialect.LINUX_6_1 && (type == FetchType.SYMBOL || type == FetchType.SYMSTR)) return null;
            return type;
        }

        /** {@code __parse_bitfield_probe_arg}; null when the kernel says BAD_BITFIELD. */
        Bitfield parseBitfield(String bf, FetchType t) {
            long[] w = Bytes.simpleStrtoull(bf, 1);
            long bw = w[0];
            int tail = (int) w[1];
            if (bw == 0 || Bytes.charAt(bf, tail) != '@') return null;
            long[] o = Bytes.simpleStrtoull(bf, tail + 1);
            long bo = o[0];
            int tail2 = (int) o[1];
            if (tail2 == tail + 1 || Bytes.charAt(bf, tail2) != '/') return null;
            cur++;
            if (code[cur].op != NOP) return null;
            int bits = t.size() * 8;
            Bitfield b = new Bitfield(bw, bo, bits);
            code[cur].op = MOD_BF;
            code[cur].lshift = b.leftShift();
            code[cur].rshift = b.rightShift();
            code[cur].basesize = t.size();
            return Long.compareUnsigned(bits, bw + bo) < 0 ? null : b;
        }

        /** {@code parse_probe_arg} (recursive). */
        FetchExpr parseProbeArg(String arg, int offs) throws ProbeSyntaxException {
            FetchExpr expr = null;
            char c0 = Bytes.charAt(arg, 0);
            switch (c0) {
                case '$' -> expr = parseProbeVars(arg.substring(1), offs);
                case '%' -> {
                    // eprobe and fprobe do not handle registers: BAD_VAR, then the unparsed argument's BAD_FETCH_ARG
                    if (fprobe) throw err(offs, KernelError.BAD_FETCH_ARG).after(err(offs, KernelError.BAD_VAR));
                    RegisterSet.Register r = regs.lookup(Bytes.decode(arg.substring(1)));
                    if (r == null) throw err(offs, KernelError.BAD_REG_NAME);
                    code[cur].op = REG;
                    code[cur].param = r.slot();
                    expr = new FetchExpr.Reg(r);
                }
                case '@' -> {
                    char c1 = Bytes.charAt(arg, 1);
                    if (Bytes.isDigit(c1)) {
                        Long a = Bytes.kstrtoull(arg.substring(1), 0);
                        if (a == null) throw err(offs, KernelError.BAD_MEM_ADDR);
                        code[cur].op = IMM;
                        code[cur].imm = a;
                        expr = new FetchExpr.AbsoluteMemory(a);
                    } else if (c1 == '+') {
                        if (!user) throw err(offs, KernelError.FILE_ON_KPROBE);
                        Long o = Bytes.kstrtoll(arg.substring(2), 0);
                        if (o == null) throw err(offs, KernelError.BAD_FILE_OFFS);
                        code[cur].op = FOFFS;
                        code[cur].imm = o;
                        expr = new FetchExpr.FileOffset(o);
                    } else {
                        if (user) throw err(offs, KernelError.SYM_ON_UPROBE);
                        code[cur].op = NOP_SYMBOL;
                        code[cur].data = arg.substring(1);
                        if (++cur == FETCH_INSN_MAX - 1) throw err(offs, KernelError.TOO_MANY_OPS);
                        code[cur].op = IMM;
                        code[cur].imm = 0;
                        expr = new FetchExpr.SymbolMemory(Bytes.decode(arg.substring(1)));
                    }
                    if (++cur == FETCH_INSN_MAX - 1) throw err(offs, KernelError.TOO_MANY_OPS);
                    code[cur].op = DEREF;
                    code[cur].offset = 0;
                }
                case '+', '-' -> {
                    boolean user = false;
                    String a = arg;
                    if (Bytes.charAt(a, 1) == 'u') {
                        user = true;
                        a = a.charAt(0) + a.substring(2);
                    }
                    if (a.charAt(0) == '+') a = a.substring(1);
                    int open = a.indexOf('(');
                    if (open < 0) throw err(offs, KernelError.DEREF_NEED_BRACE);
                    Long off = Bytes.kstrtoll(a.substring(0, open), 0);
                    if (off == null) throw err(offs, KernelError.BAD_DEREF_OFFS);
                    offs += open + 1 + (Bytes.charAt(a, 0) != '-' ? 1 : 0);
                    String inner = a.substring(open + 1);
                    int close = inner.lastIndexOf(')');
                    if (close < 0) throw err(offs + inner.length(), KernelError.DEREF_OPEN_BRACE);
                    FetchExpr base = parseProbeArg(inner.substring(0, close), offs);
                    // 6.6+ keep the offset in the parse context: past the outermost dereference's
                    // "+OFFS(" once parsed (recorded: 6.12 and 7.2 put the caret of a bad bitfield there)
                    if (dialect != Dialect.LINUX_6_1) ctxOffset = offs;
                    if (code[cur].op == COMM || code[cur].op == DATA) throw err(offs, KernelError.COMM_CANT_DEREF);
                    if (++cur == FETCH_INSN_MAX - 1) throw err(offs, KernelError.TOO_MANY_OPS);
                    code[cur].op = user ? UDEREF : DEREF;
                    code[cur].offset = off;
                    expr = new FetchExpr.Deref(base, off, user);
                    lastType = null;          // the dereference's type is not the BTF one
                }
                case '\\' -> {
                    if (Bytes.charAt(arg, 1) == '"') {
                        String s = arg.substring(2);
                        int len = s.length();
                        if (len > 0 && s.charAt(len - 1) != '"') throw err(offs + 2 + len, KernelError.IMMSTR_NO_CLOSE);
                        String text = len > 0 ? s.substring(0, len - 1) : "";
                        code[cur].op = DATA;
                        code[cur].bytes = text.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
                        expr = new FetchExpr.ImmediateString(Bytes.decode(text));
                    } else {
                        Long v = strToImmediate(arg.substring(1));
                        if (v == null) throw err(offs + 1, KernelError.BAD_IMM);
                        code[cur].op = IMM;
                        code[cur].imm = v;
                        expr = new FetchExpr.Immediate(v);
                    }
                }
                case '(' -> {
                    // 6.15+: a typecast, which only eprobes take (recorded on 7.2)
                    if (dialect.typecasts()) throw err(offs, KernelError.TYPECAST_NOT_EVENT);
                }
                default -> {
                    if (dialect.btfArgs && (Bytes.isAlpha(c0) || c0 == '_')) {   // a BTF variable
                        if (user || (!fentry && !isReturn)) throw err(offs, KernelError.NOSUP_BTFARG);
                        expr = parseBtfArg(arg, offs);
                    }
                }
            }
            if (code[cur].op == NOP) throw err(offs, KernelError.BAD_FETCH_ARG);
            return expr;
        }

        /** {@code str_to_immediate}. */
        Long strToImmediate(String s) {
            char c = Bytes.charAt(s, 0);
            if (Bytes.isDigit(c)) return Bytes.kstrtoull(s, 0);
            if (c == '-') return Bytes.kstrtoll(s, 0);
            if (c == '+') return Bytes.kstrtoll(s.substring(1), 0);
            return null;
        }

        /** {@code generate_probe_arg_name}: with BTF arguments an unnamed argument that is an identifier names itself. */
        String generatedName(String arg, int i) {
            if (dialect.btfArgs) {
                int colon = arg.indexOf(':');
                String n = colon >= 0 ? arg.substring(0, colon) : arg;
                if (Bytes.isGoodName(n)) return n;
            }
            return "arg" + (i + 1);
        }

        /** {@code __store_entry_arg}: the offset in the entry data where parameter {@code argnum} is saved. */
        int storeEntryArg(int argnum) {
            int k = entryArgs.indexOf(argnum);
            if (k < 0) {
                k = entryArgs.size();
                entryArgs.add(argnum);
            }
            return k * 8;
        }

        /** {@code query_btf_context}: the probed function's prototype, or null. */
        BtfFunction queryBtf() {
            if (btf == null) {
                btf = BtfFunction.find(symbols, function);
                if (btf != null && tpoint) btf = btf.withoutFirstParam();   // the probestub's 'data'
            }
            return btf;
        }

        /** {@code traceprobe_expand_meta_args}: {@code $arg*} and {@code $argN} become parameter names when BTF knows the function. */
        List<String> expandMetaArgs(List<String> args) throws ProbeSyntaxException {
            int argsIdx = -1;
            boolean found = false;
            for (int i = 0; i < args.size(); i++) {          // argv_has_var_arg
                String a = args.get(i);
                if (!a.startsWith("$arg")) continue;
                index = i + 2;
                if (!fentry && !isReturn) throw err(0, KernelError.NOFENTRY_ARGS);
                char c = Bytes.charAt(a, 4);
                if (Bytes.isDigit(c)) {
                    found = true;
                    continue;
                }
                if (c != '*') throw err(0, KernelError.BAD_VAR);
                if (argsIdx >= 0) throw err(0, KernelError.DOUBLE_ARGS);
                found = true;
                argsIdx = i;
            }
            if (!found) return args;
            BtfFunction f = queryBtf();
            if (f == null || f.params().isEmpty()) {
                if (argsIdx != -1) throw err(0, KernelError.NOSUP_BTFARG, Errno.EOPNOTSUPP);
                return args;
            }
            List<String> out = new ArrayList<>();
            int[] used = {0};
            for (int i = 0; i < args.size(); i++) {
                index = i + 2;
                String a = args.get(i);
                if (i == argsIdx) {
                    for (int n = 0; n < f.params().size(); n++) out.add(nthParam(f, n, "", used));
                } else if (a.startsWith("$arg")) {
                    int e = 4;
                    long n = 0;
                    while (e < a.length() && Bytes.isDigit(a.charAt(e))) n = n * 10 + (a.charAt(e++) - '0');
                    String type = a.substring(e);
                    if (!type.isEmpty() && type.charAt(0) != ':') throw err(0, KernelError.BAD_VAR, Errno.ENOENT);
                    if (n == 0) throw err(0, KernelError.BAD_ARG_NUM);
                    out.add(nthParam(f, n - 1, type, used));
                } else {
                    out.add(a);
                }
            }
            return out;
        }

        /** {@code sprint_nth_btf_arg}. */
        String nthParam(BtfFunction f, long idx, String type, int[] used) throws ProbeSyntaxException {
            if (idx >= f.params().size()) throw err(0, KernelError.NO_BTFARG, Errno.ENOENT);
            String s = Bytes.encode(f.params().get((int) idx).name()) + type;
            if (s.length() >= MAX_BTF_ARGS_LEN - used[0]) throw err(0, KernelError.ARGS_2LONG, Errno.E2BIG);
            used[0] += s.length() + 1;
            return s;
        }

        /**
         * {@code traceprobe_expand_dentry_args}: {@code X:%pd} (a dentry's name) and {@code X:%pD} (a
         * file's) become string fetches through the offsets of {@code dentry.d_name.name} and
         * {@code file.f_path.dentry} in the kernel's own BTF.
         */
        List<String> expandDentryArgs(List<String> args) {
            Btf b = symbols.btf();
            if (b == null) return args;
            List<String> out = new ArrayList<>(args.size());
            for (String a : args) {
                if (!(a.endsWith(":%pd") || a.endsWith(":%pD"))) {
                    out.add(a);
                    continue;
                }
                int eq = a.indexOf('=');
                String body = a.substring(eq + 1, a.length() - 4);
                String prefix = eq >= 0 ? a.substring(0, eq + 1) : "";
                long name = b.offsetOf("dentry", "d_name.name").offset();
                String inner = a.endsWith("d") ? body
                        : "+0x" + Long.toHexString(b.offsetOf("file", "f_path.dentry").offset()) + "(" + body + ")";
                out.add(prefix + "+0x0(+0x" + Long.toHexString(name) + "(" + inner + ")):string");
            }
            return out;
        }

        /** {@code split_next_field}: {start of the next field or -1, 1 for '->', 0 for '.'}; BAD_HYPHEN for a lone '-'. */
        int[] splitNextField(String name) throws ProbeSyntaxException {
            for (int k = 0; k < name.length(); k++) {
                char c = name.charAt(k);
                if (c == '-') {
                    if (Bytes.charAt(name, k + 1) == '>') return new int[] {k, k + 2, 1};
                    throw err(ctxOffset + k, KernelError.BAD_HYPHEN);
                }
                if (c == '.') return new int[] {k, k + 1, 0};
            }
            return new int[] {name.length(), -1, 0};
        }

        /** {@code parse_btf_arg}: a parameter (or {@code $retval}) by name, then its members through pointers. */
        FetchExpr parseBtfArg(String varname, int offs) throws ProbeSyntaxException {
            ctxOffset = offs;
            if (function == null) throw silent("BTF arguments need a probed symbol");
            int[] sp = splitNextField(varname);
            String head = varname.substring(0, sp[0]);
            int fieldAt = sp[1];
            boolean isPtr = sp[2] == 1;
            if (!isPtr && fieldAt >= 0) throw err(ctxOffset + fieldAt, KernelError.NOSUP_DAT_ARG, Errno.EOPNOTSUPP);
            int tid;
            FetchExpr expr;
            if (isReturn && head.equals("$retval")) {
                code[cur].op = RETVAL;
                expr = new FetchExpr.ReturnValue();
                BtfFunction f = queryBtf();
                if (f == null) {
                    if (fieldAt >= 0) throw err(ctxOffset + fieldAt, KernelError.NO_BTF_ENTRY, Errno.ENOENT);
                    return expr;
                }
                if (f.returnTypeId() == 0) throw err(ctxOffset, KernelError.NO_RETVAL, Errno.ENOENT);
                tid = f.returnTypeId();
            } else {
                BtfFunction f = queryBtf();
                if (f == null || f.params().isEmpty()) throw err(ctxOffset, KernelError.NO_BTF_ENTRY, Errno.ENOENT);
                int i = 0;
                String want = Bytes.decode(head);
                while (i < f.params().size() && !f.params().get(i).name().equals(want)) i++;
                if (i == f.params().size()) throw err(ctxOffset, KernelError.NO_BTFARG, Errno.ENOENT);
                if (fentry) {
                    code[cur].op = ARG;
                    code[cur].param = tpoint ? i + 1 : i;
                } else {
                    code[cur].op = EDATA;
                    code[cur].param = i;
                    code[cur].offset = storeEntryArg(i);
                }
                expr = new FetchExpr.Parameter(want, i + 1);
                tid = f.params().get(i).typeId();
            }
            BtfType type = btf.skipModifiers(tid);
            if (type == null) throw err(ctxOffset, KernelError.BAD_BTF_TID);
            lastType = type;
            lastBitoffs = 0;
            lastBitsize = 0;
            if (fieldAt < 0) return expr;
            ctxOffset += fieldAt;
            return parseBtfField(varname.substring(fieldAt), type, expr);
        }

        /** {@code parse_btf_field}: one dereference per {@code ->}, '.' members summed into its offset. */
        FetchExpr parseBtfField(String fieldname, BtfType type, FetchExpr expr) throws ProbeSyntaxException {
            String rest = fieldname;
            do {
                if (type.kind() != BtfKind.PTR) throw err(ctxOffset, KernelError.NO_PTR_STRCT);
                type = btf.skipModifiers(type.type());
                if (type == null) throw err(ctxOffset, KernelError.BAD_BTF_TID);
                long bitoffs = 0;
                boolean isPtr;
                do {
                    int[] sp = splitNextField(rest);
                    isPtr = sp[2] == 1;
                    String name = Bytes.decode(rest.substring(0, sp[0]));
                    if (!type.kind().isComposite()) throw err(ctxOffset, KernelError.BAD_BTF_TID);
                    BtfFunction.Member m = btf.member(type, name);
                    if (m == null) throw err(ctxOffset, KernelError.NO_BTF_FIELD, Errno.ENOENT);
                    bitoffs += m.bitOffset();
                    lastBitsize = m.bitfieldSize();
                    type = btf.skipModifiers(m.typeId());
                    if (type == null) throw err(ctxOffset, KernelError.BAD_BTF_TID);
                    rest = sp[1] >= 0 ? rest.substring(sp[1]) : null;
                    if (sp[1] >= 0) ctxOffset += sp[1];
                } while (!isPtr && rest != null);
                if (++cur == FETCH_INSN_MAX - 1) throw err(ctxOffset, KernelError.TOO_MANY_OPS);
                code[cur].op = DEREF;
                code[cur].offset = bitoffs / 8;
                expr = new FetchExpr.Deref(expr, bitoffs / 8, false);
                lastBitoffs = bitoffs % 8;
                lastType = type;
            } while (rest != null);
            return expr;
        }

        /** {@code check_prepare_btf_string_fetch}: a char array is a string in place, a char pointer is read through. */
        void prepareBtfStringFetch(String t) throws ProbeSyntaxException {
            if (btf == null || lastType == null) return;
            if (btf.isCharArray(lastType)) return;
            if (btf.isCharPointer(lastType)) {
                if (code[cur + 1].op == END) throw err(ctxOffset, KernelError.TOO_MANY_OPS, Errno.E2BIG);
                cur++;
                code[cur].op = t.charAt(0) == 'u' ? UDEREF : DEREF;
                code[cur].offset = 0;
                return;
            }
            throw err(ctxOffset, KernelError.BAD_TYPE4STR);
        }

        /** {@code parse_probe_vars} ({@code arg} is the text after '$'). */
        FetchExpr parseProbeVars(String arg, int offs) throws ProbeSyntaxException {
            if (dialect.btfArgs ? arg.startsWith("retval") : arg.equals("retval")) {
                if (!isReturn) throw err(offs, KernelError.RETVAL_ON_PROBE);
                if (dialect.btfArgs && !user) return parseBtfArg("$" + arg, offs);
                code[cur].op = RETVAL;
                return new FetchExpr.ReturnValue();
            }
            if (arg.startsWith("stack")) {
                String rest = arg.substring(5);
                if (rest.isEmpty()) {
                    code[cur].op = STACKP;
                    return new FetchExpr.StackPointer();
                }
                if (!Bytes.isDigit(rest.charAt(0))) throw err(offs, KernelError.BAD_VAR);
                Long n = Bytes.kstrtoull(rest, 10);
                if (n == null) throw err(offs, KernelError.BAD_VAR);
                if (!user && n > RegisterSet.PARAM_MAX_STACK) throw err(offs, KernelError.BAD_STACK_NUM);
                code[cur].op = STACK;
                code[cur].param = (int) (long) n;
                return new FetchExpr.StackEntry((int) (long) n);
            }
            if (wprobe && arg.equals("addr")) {
                code[cur].op = BADDR;
                return new FetchExpr.WatchAddress();
            }
            if (arg.equals("comm") || arg.equals("COMM")) {
                code[cur].op = COMM;
                return new FetchExpr.Comm();
            }
            boolean argsHere = dialect.retprobeArgs || fentry;
            if (argsHere && arg.startsWith("arg")) {
                Long n = Bytes.kstrtoull(arg.substring(3), 10);
                if (n == null) throw err(offs, KernelError.BAD_VAR);
                if (n == 0 || n > RegisterSet.PARAM_MAX_STACK) throw err(offs, KernelError.BAD_ARG_NUM);
                if (user || (!fentry && !isReturn)) throw err(offs, KernelError.NOFENTRY_ARGS);
                if (fentry) {
                    code[cur].op = ARG;
                    code[cur].param = (int) (tpoint ? n : n - 1);   // a tracepoint's stub: skip 'data'
                } else {                  // a return probe saves the argument at entry
                    code[cur].op = EDATA;
                    code[cur].param = (int) (n - 1);
                    code[cur].offset = storeEntryArg((int) (n - 1));
                }
                return new FetchExpr.Argument((int) (long) n);
            }
            throw err(offs, KernelError.BAD_VAR);
        }
    }
}
