package dev.kpemu.kprobes.events;

import java.util.Locale;

/**
 * Which kernel's {@code kprobe_events} language to speak: grammar, accepted types, and every
 * error_log message and caret as that kernel prints them. Each constant is a Debian kernel line
 * whose answers Linux itself recorded under QEMU ({@code guest-images/reference/ARCH/SERIES/dialect.error_log}):
 * {@link #forRelease} picks the one of the booted kernel; {@code --dialect} forces one.
 */
public enum Dialect {
    /**
     * Linux 6.1 stable as shipped by Debian 12, with its backports: NON_UNIQ_SYMBOL and the
     * {@code symstr} type (recorded: Debian's 6.1.192 accepts {@code +0(%di):symstr}); no
     * {@code char} type ("Unknown type is specified"); no BTF arguments (a parameter name is
     * "Invalid fetch argument").
     */
    LINUX_6_1("6.1", true, false, false, false, false, false, false),
    /**
     * Linux 6.10 to 6.14 with CONFIG_PROBE_EVENTS_BTF_ARGS (Debian 13's 6.12): BTF arguments
     * (parameter names, {@code $arg*}, {@code ->} member access, return-probe {@code $argN},
     * {@code $retval} typed from the prototype, {@code :%pd}/{@code :%pD}); more than 128
     * arguments fail with E2BIG and nothing logged.
     */
    LINUX_6_12("6.12", true, true, true, false, true, true, true),
    /**
     * Linux 6.15 and later (unstable's 7.x): as {@link #LINUX_6_12}, and more than 128 arguments
     * are logged ("Too many arguments are specified").
     */
    LINUX_7("7", true, true, true, true, true, true, true) {
        @Override boolean typecasts() { return true; }
        @Override boolean fprobeMissingSymbolIsBadAddress() { return true; }
        @Override boolean logsUnmatchedDynamicEvent() { return true; }
        @Override boolean eventExistIsEinval() { return true; }
        @Override boolean fprobesInRegistrationOrder() { return true; }
        @Override boolean tracepointTakesManyProbes() { return true; }
    },
    /** Mainline without BTF (CONFIG_PROBE_EVENTS_BTF_ARGS off): the later grammar on registers only. */
    MAINLINE("mainline", true, true, true, true, true, true, false);

    private final String label;
    final boolean symstr;
    final boolean retprobeArgs;
    final boolean needStringTypeError;
    final boolean tooManyArgsError;
    final boolean badMaxactTypeName;
    final boolean charType;
    final boolean btfArgs;

    Dialect(String label, boolean symstr, boolean retprobeArgs, boolean needStringTypeError,
            boolean tooManyArgsError, boolean badMaxactTypeName, boolean charType, boolean btfArgs) {
        this.label = label;
        this.symstr = symstr;
        this.retprobeArgs = retprobeArgs;
        this.needStringTypeError = needStringTypeError;
        this.tooManyArgsError = tooManyArgsError;
        this.badMaxactTypeName = badMaxactTypeName;
        this.charType = charType;
        this.btfArgs = btfArgs;
    }

    /** Whether a fetch argument opening with '(' is a typecast ("Typecasts are only for eprobe fields"). */
    boolean typecasts() { return false; }

    /**
     * Whether the kernel has fprobe and tracepoint-probe events ({@code f}, {@code t} in
     * {@code dynamic_events}: Linux 6.4+, when built with CONFIG_FPROBE_EVENTS, which
     * {@link KernelSymbols#hasFprobeEvents} tells from the kernel's symbols).
     */
    public boolean hasFprobeEvents() { return this != LINUX_6_1; }

    /**
     * x86's {@code can_probe} refuses INT and UD instructions with EILSEQ (Linux 6.4's
     * {@code is_exception_insn}): recorded, 6.12 and 7.2 answer a probe on an {@code int3} so,
     * 6.1 with EINVAL ({@code reference/x86_64/SERIES/patched.error_log}).
     */
    public boolean refusesExceptionInstructions() { return this != LINUX_6_1; }

    /**
     * An fprobe whose function ftrace does not know: 6.12's {@code register_fprobe} fails with
     * EINVAL, logged "Failed to register probe event"; 7.2's with ENOENT, logged "Invalid probed
     * address or symbol" (the write still EINVAL; recorded).
     */
    boolean fprobeMissingSymbolIsBadAddress() { return false; }

    /**
     * Whether fprobes on one function run in the order they were registered (7.2's fprobe, on
     * fgraph; recorded: {@code f:fvr vfs_read …} before {@code f:fg vfs_rea*}) rather than newest
     * first (6.12's, one ftrace_ops each; recorded).
     */
    boolean fprobesInRegistrationOrder() { return false; }

    /**
     * Whether a tracepoint takes a second tracepoint probe (7.2, recorded); 6.12 refused one under
     * QEMU (the corpus guest's write of {@code t:tex2 sched_process_exec …} after {@code t:tex …}),
     * with an answer not recorded, which kpemu therefore does not imitate.
     */
    boolean tracepointTakesManyProbes() { return false; }

    /** Whether {@code dynamic_events} logs a command no event type takes ("No matching dynamic event type", 6.15+; recorded on 7.2). */
    boolean logsUnmatchedDynamicEvent() { return false; }

    /** Whether a new probe event named as an existing event fails with EINVAL (7.2) rather than EEXIST (6.12); recorded for tracepoint probes. */
    boolean eventExistIsEinval() { return false; }

    /** The name {@code --dialect} takes: {@code 6.1}, {@code 6.12}, {@code 7}, {@code mainline}. */
    public String label() { return label; }

    /** The dialect {@code --dialect NAME} names (a label, or a kernel release such as {@code 6.12.117}), or null. */
    public static Dialect byName(String name) {
        if (name == null) return null;
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (Dialect d : values()) if (d.label.equals(n) || d.name().toLowerCase(Locale.ROOT).equals(n)) return d;
        return n.matches("\\d+\\.\\d+.*") ? forRelease(n) : null;
    }

    /** The dialect of a kernel release ({@code uname -r}): 6.1 before 6.10, 6.12 to 6.14, 7 from 6.15. */
    public static Dialect forRelease(String release) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)\\.(\\d+)").matcher(release == null ? "" : release);
        if (!m.find()) return LINUX_6_1;
        int major = Integer.parseInt(m.group(1)), minor = Integer.parseInt(m.group(2));
        if (major > 6 || (major == 6 && minor >= 15)) return LINUX_7;
        return major == 6 && minor >= 10 ? LINUX_6_12 : LINUX_6_1;
    }

    /**
     * Whether the kernel numbers its thread flags with the generic TIF bits
     * ({@code include/asm-generic/thread_info_tif.h}: TIF_NEED_RESCHED 4, TIF_NEED_RESCHED_LAZY 5),
     * as the 7.x kernels do on x86-64 and arm64; before, x86-64's TIF_NEED_RESCHED is 3, arm64's 1.
     */
    public boolean hasGenericTifBits() { return this == LINUX_7 || this == MAINLINE; }

    /** Whether arguments may name the probed function's parameters and their members from BTF (6.10+). */
    public boolean hasBtfArgs() { return btfArgs; }

    /** Whether an untyped {@code $retval} takes the probed function's BTF return type (6.10+). */
    public boolean hasBtfRetval() { return btfArgs; }

    /** Whether the {@code symstr} type exists (Linux 6.2+, backported to Debian's 6.1). */
    public boolean hasSymstr() { return symstr; }

    /** Whether kretprobes may fetch {@code $argN} (Linux 6.10+). */
    public boolean hasRetprobeArgs() { return retprobeArgs; }

    /** How the kernel parses event filters and the filters of hist triggers. */
    public dev.kpemu.kprobes.events.filter.FilterDialect filters() {
        return switch (this) {
            case LINUX_6_1 -> dev.kpemu.kprobes.events.filter.FilterDialect.LINUX_6_1;
            case LINUX_6_12 -> dev.kpemu.kprobes.events.filter.FilterDialect.LINUX_6_12;
            case LINUX_7, MAINLINE -> dev.kpemu.kprobes.events.filter.FilterDialect.LINUX_7;
        };
    }

    /**
     * Whether an empty user string prints {@code (fault)}: before mainline's "maccess: fix
     * strncpy_from_user_nofault() empty string handling" (6.13), {@code strncpy_from_user_nofault}
     * returns 0 for an empty string, which {@code fetch_store_string_user} stores as a length-0
     * {@code __data_loc}. It is every user-string read: {@code :ustring}, {@code +u} strings and a
     * {@code :string} of a user address (below TASK_SIZE, read through the user accessors on
     * x86-64 and arm64 alike: CONFIG_ARCH_HAS_NON_OVERLAPPING_ADDRESS_SPACE). Recorded
     * ({@code guest-images/reference/ARCH/SERIES/rawbytes.trace}, {@code kuser.trace}): Debian's
     * 6.1.192 and 6.12.117 print {@code (fault)} on both arches, 7.2 prints {@code ""}. (6.13 and
     * 6.14 speak the 6.12 dialect here but already have the fix.)
     */
    public boolean emptyUserStringFaults() { return this == LINUX_6_1 || this == LINUX_6_12; }

    /** Whether the {@code char} type exists (Linux 6.5+). */
    public boolean hasCharType() { return charType; }
}
