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
    LINUX_6_1(true, false, false, false, false, false),
    /** Later mainline without BTF argument support. */
    MAINLINE(true, true, true, true, true, true);

    final boolean symstr;
    final boolean retprobeArgs;
    final boolean needStringTypeError;
    final boolean tooManyArgsError;
    final boolean badMaxactTypeName;
    final boolean charType;

    Dialect(boolean symstr, boolean retprobeArgs, boolean needStringTypeError,
            boolean tooManyArgsError, boolean badMaxactTypeName, boolean charType) {
        this.symstr = symstr;
        this.retprobeArgs = retprobeArgs;
        this.needStringTypeError = needStringTypeError;
        this.tooManyArgsError = tooManyArgsError;
        this.badMaxactTypeName = badMaxactTypeName;
        this.charType = charType;
    }

    /** Whether the {@code symstr} type exists (Linux 6.2+, backported to Debian's 6.1). */
    public boolean hasSymstr() { return symstr; }

    /** Whether kretprobes may fetch {@code $argN} (Linux 6.10+). */
    public boolean hasRetprobeArgs() { return retprobeArgs; }

    /** Whether the {@code char} type exists (Linux 6.5+). */
    public boolean hasCharType() { return charType; }
}
