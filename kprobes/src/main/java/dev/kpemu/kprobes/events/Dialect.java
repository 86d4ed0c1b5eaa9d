package dev.kpemu.kprobes.events;

/**
 * Which kernel's parser to imitate. The guests kpemu boots are Debian 12's Linux 6.1, so
 * {@link #LINUX_6_1} is the default; {@link #MAINLINE} switches on the later behaviour that
 * does not need BTF (symstr, kretprobe {@code $argN}, logged string-type and too-many-args
 * errors, the renamed maxactive error). BTF arguments are not emulated in either dialect.
 */
public enum Dialect {
    /**
     * Linux 6.1 stable as shipped by Debian 12, with its backports: NON_UNIQ_SYMBOL and the
     * {@code symstr} type (recorded: Debian's 6.1.192 accepts {@code +0(%di):symstr}); no
     * {@code char} type ("Unknown type is specified").
     */
    LINUX_6_1(true, false, false, false, false, false, false),
    /**
     * Linux 6.10 and later with CONFIG_PROBE_EVENTS_BTF_ARGS (Debian 13's 6.12, unstable's 7.x):
     * the mainline parser, and an untyped {@code $retval} takes the function's return type from
     * BTF (recorded: 6.12 prints {@code ret=3}, {@code ret=-2} for do_sys_openat2's {@code long}).
     * Argument names and member access from BTF are not yet parsed.
     */
    LINUX_6_12(true, true, true, true, true, true, true),
    /** Later mainline without BTF support. */
    MAINLINE(true, true, true, true, true, true, false);

    final boolean symstr;
    final boolean retprobeArgs;
    final boolean needStringTypeError;
    final boolean tooManyArgsError;
    final boolean badMaxactTypeName;
    final boolean charType;
    final boolean btfRetval;

    Dialect(boolean symstr, boolean retprobeArgs, boolean needStringTypeError,
            boolean tooManyArgsError, boolean badMaxactTypeName, boolean charType, boolean btfRetval) {
        this.symstr = symstr;
        this.retprobeArgs = retprobeArgs;
        this.needStringTypeError = needStringTypeError;
        this.tooManyArgsError = tooManyArgsError;
        this.badMaxactTypeName = badMaxactTypeName;
        this.charType = charType;
        this.btfRetval = btfRetval;
    }

    /** The dialect of a kernel release ({@code uname -r}): 6.1 before 6.10, the BTF-aware one from 6.10. */
    public static Dialect forRelease(String release) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)\\.(\\d+)").matcher(release == null ? "" : release);
        if (!m.find()) return LINUX_6_1;
        int major = Integer.parseInt(m.group(1)), minor = Integer.parseInt(m.group(2));
        return major > 6 || (major == 6 && minor >= 10) ? LINUX_6_12 : LINUX_6_1;
    }

    /** Whether an untyped {@code $retval} takes the probed function's BTF return type (6.10+). */
    public boolean hasBtfRetval() { return btfRetval; }

    /** Whether the {@code symstr} type exists (Linux 6.2+, backported to Debian's 6.1). */
    public boolean hasSymstr() { return symstr; }

    /** Whether kretprobes may fetch {@code $argN} (Linux 6.10+). */
    public boolean hasRetprobeArgs() { return retprobeArgs; }

    /** Whether the {@code char} type exists (Linux 6.5+). */
    public boolean hasCharType() { return charType; }
}
