package dev.kpemu.kprobes.events;

import java.util.List;
import java.util.Objects;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

/**
 * Parses {@code uprobe_events} commands as the booted kernel does ({@code __trace_uprobe_create}
 * and {@code dyn_event_release}): the same checks in the same order, the same {@code error_log}
 * messages (logged by {@code trace_uprobe}) and carets, the same listing. The place's path is
 * looked up in the guest's files when the command is parsed, as Linux looks it up when it is
 * written. Fetch arguments go through the kprobe parser in its uprobe mode
 * ({@code TPARG_FL_USER}: {@code @+OFFS}, no {@code @SYM}, no {@code $argN}, no stack limit, no
 * symbol types after 6.1). Recorded answers: {@code guest-images/reference/ARCH/SERIES/uprobes.error_log}.
 */
public final class UprobeParser {
    /** {@code UPROBE_EVENT_SYSTEM}. */
    public static final String DEFAULT_GROUP = "uprobes";
    /** The error_log's subsystem for uprobe commands. */
    static final String SUBSYSTEM = "trace_uprobe";

    private final ProbeParser args;
    private final GuestFiles files;

    public UprobeParser(Arch arch, Dialect dialect, GuestFiles files) {
        this.args = new ProbeParser(arch, dialect, KernelSymbols.permissive());
        this.files = Objects.requireNonNull(files);
    }

    /**
     * Parses one command line. Returns null for a blank or comment-only line.
     *
     * @throws ProbeSyntaxException with the kernel's error_log entry (if it logs one) and errno
     */
    public UprobeCommand parse(String line) throws ProbeSyntaxException {
        String b = Bytes.encode(line);
        int nul = b.indexOf('\0');
        if (nul >= 0) b = b.substring(0, nul);
        if (b.length() > ProbeParser.WRITE_BUFSIZE - 2)
            throw ProbeSyntaxException.silent(line, Errno.EINVAL,
                    "Line length is too long: Should be less than " + (ProbeParser.WRITE_BUFSIZE - 2));
        int hash = b.indexOf('#');
        if (hash >= 0) b = b.substring(0, hash);
        List<String> argv = Bytes.argvSplit(b);
        if (!b.isEmpty() && b.charAt(0) == '-') return new UprobeCommand.Delete(ProbeParser.parseDelete(argv));
        if (argv.isEmpty()) return null;
        return create(argv);
    }

    private UprobeDef create(List<String> argv) throws ProbeSyntaxException {
        String cmd = Bytes.decode(String.join(" ", argv));
        String a0 = argv.get(0);
        char kind = a0.charAt(0);
        // -ECANCELED: no event type takes the command; uprobe_events makes it EINVAL, unlogged
        if (kind != 'p' && kind != 'r') throw silent(cmd, "not a uprobe command");
        boolean ret = kind == 'r';
        if (argv.size() < 2) throw silent(cmd, "a uprobe command needs PATH:OFFSET");
        if (argv.size() - 2 > ProbeParser.MAX_TRACE_ARGS)
            throw ProbeSyntaxException.silent(cmd, Errno.E2BIG, "more than " + ProbeParser.MAX_TRACE_ARGS + " arguments");
        String event = a0.length() > 1 && a0.charAt(1) == ':' ? a0.substring(2) : null;

        String place = argv.get(1);
        if (place.indexOf('/') < 0) throw silent(cmd, "the place has no '/'");
        int colon = place.lastIndexOf(':');
        if (colon < 0 || !Bytes.isDigit(Bytes.charAt(place, colon + 1))) throw silent(cmd, "no offset after the path's last ':'");
        String filename = place.substring(0, colon);
        String rest = place.substring(colon + 1);
        int restAt = colon + 1;            // rest's position in argv[1]

        GuestFiles.Lookup found = files.lookup(Bytes.decode(filename));
        if (!found.found()) throw err(argv, 1, 0, KernelError.FILE_NOT_FOUND, found.errno());
        if (!found.regular()) throw err(argv, 1, 0, KernelError.NO_REGULAR_FILE, Errno.EINVAL);

        long refCtr = 0;
        int open = rest.indexOf('(');
        if (open >= 0) {
            int close = rest.indexOf(')', open);
            if (close < 0) throw err(argv, 1, restAt + rest.length(), KernelError.REFCNT_OPEN_BRACE, Errno.EINVAL);
            if (close + 1 < rest.length()) throw err(argv, 1, restAt + close + 1, KernelError.BAD_REFCNT_SUFFIX, Errno.EINVAL);
            String text = rest.substring(open + 1, close);
            Long v = Bytes.kstrtoull(text, 0);
            if (v == null) throw err(argv, 1, restAt + open + 1, KernelError.BAD_REFCNT, rangeOrInval(text));
            refCtr = v;
            rest = rest.substring(0, open);
        }
        int pct = rest.indexOf('%');
        if (pct >= 0) {
            if (!rest.substring(pct).equals("%return")) throw err(argv, 1, restAt + pct, KernelError.BAD_ADDR_SUFFIX, Errno.EINVAL);
            rest = rest.substring(0, pct);
            ret = true;
        }
        Long offset = Bytes.kstrtoull(rest, 0);
        if (offset == null) throw err(argv, 1, restAt, KernelError.BAD_UPROBE_OFFS, rangeOrInval(rest));

        String group = DEFAULT_GROUP, name = null;
        if (event != null) {
            String[] ge = args.parseUprobeEventName(argv, event, 2);
            if (ge[0] != null) group = ge[0];
            name = ge[1];
        }
        if (name == null) name = defaultEventName(filename, offset);
        List<FetchArg> fetch = args.parseUprobeArgs(argv, ret);
        return new UprobeDef(Bytes.decode(group), Bytes.decode(name), Bytes.decode(filename), found.canonicalPath(),
                offset, refCtr, ret, fetch, cmd);
    }

    /**
     * The event name Linux gives a probe without one: {@code p_BASENAME_0xOFFSET} (also for return
     * probes), the base name cut at its first {@code .}, {@code -} or {@code _}, the whole at most
     * {@code MAX_EVENT_NAME_LEN - 1} bytes.
     */
    static String defaultEventName(String filename, long offset) {
        String tail = filename.substring(filename.lastIndexOf('/') + 1);
        for (int i = 0; i < tail.length(); i++) {
            char c = tail.charAt(i);
            if (c == '.' || c == '-' || c == '_') { tail = tail.substring(0, i); break; }
        }
        String name = "p_" + tail + "_0x" + Long.toHexString(offset);
        return name.length() > ProbeParser.MAX_EVENT_NAME_LEN - 1 ? name.substring(0, ProbeParser.MAX_EVENT_NAME_LEN - 1) : name;
    }

    /** {@code kstrtoul}'s errno: ERANGE for a number past 2^64-1, EINVAL otherwise. */
    private static Errno rangeOrInval(String text) {
        return Bytes.kstrtoullOverflows(text, 0) ? Errno.ERANGE : Errno.EINVAL;
    }

    private static ProbeSyntaxException err(List<String> argv, int index, int offset, KernelError e, Errno errno) {
        return ProbeSyntaxException.at(argv, index, offset, e, errno).from(SUBSYSTEM);
    }

    private static ProbeSyntaxException silent(String cmd, String why) {
        return ProbeSyntaxException.silent(cmd, Errno.EINVAL, why);
    }
}
