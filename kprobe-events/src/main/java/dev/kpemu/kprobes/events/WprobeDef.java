package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * A wprobe (watchpoint probe) event of {@code dynamic_events}, linux-next's {@code trace_wprobe}
 * (Documentation/trace/wprobetrace.rst): {@code w[:[GRP/][EVENT]] [r|w|rw]@ADDR|SYM[+|-OFFS][:LENGTH]
 * [FETCHARGS]}. No kernel of kpemu's matrix has it: kpemu accepts it on every dialect as its own
 * extension, on {@link dev.kpemu.machine.Watchpoints} (outside the guest, no debug register
 * taken). Linux's defaults: group {@code wprobes}, access {@code rw}, length 4 (its
 * {@code HW_BREAKPOINT_LEN_4}), event named after the symbol or {@code w_0xADDR}. Linux takes the
 * lengths 1, 2, 4 and 8 (aligned); kpemu also takes any other length up to {@link #MAX_LENGTH}
 * (unaligned), its extension.
 *
 * @param symbol  the watched symbol, or null for an address
 * @param offset  the offset from the symbol
 * @param address the watched kernel-virtual address (the symbol's, resolved at parse time as
 *                Linux's {@code kallsyms_lookup_name} does, plus the offset)
 */
public record WprobeDef(String group, String event, boolean reads, boolean writes, String symbol, long offset,
                        long address, long length, List<FetchArg> args, String command)
        implements ProbeDefinition, TraceProbe {
    /** {@code WPROBE_EVENT_SYSTEM}. */
    public static final String GROUP = "wprobes";
    /** The name trace_wprobe's error_log entries carry ({@code trace_probe_log_init("wprobe", ...)}). */
    public static final String SUBSYSTEM = "wprobe";
    /** {@code HW_BREAKPOINT_LEN_4}: the length when none is given. */
    public static final int DEFAULT_LENGTH = 4;
    /** kpemu's longest watch through a {@code w:} event (its extension beyond 8 bytes). */
    public static final long MAX_LENGTH = 1L << 20;

    public WprobeDef {
        args = List.copyOf(args);
    }

    @Override
    public ProbeTarget target() {
        return symbol != null ? new ProbeTarget.SymbolTarget(null, symbol, offset) : new ProbeTarget.AddressTarget(address);
    }

    /** {@code r}, {@code w} or {@code rw}, as {@code trace_wprobe_show} prints it. */
    public String access() { return reads && writes ? "rw" : reads ? "r" : "w"; }

    /** {@code trace_wprobe_show}: {@code w:GRP/EVENT TYPE@SYM[+|-OFFS]:LEN} or {@code TYPE@0xADDR:LEN}, then the arguments. */
    public String wprobeListing() {
        StringBuilder sb = new StringBuilder("w:").append(group).append('/').append(event).append(' ').append(access()).append('@');
        if (symbol != null) {
            sb.append(symbol);
            if (offset != 0) sb.append(offset > 0 ? "+" : "").append(offset);
        } else {
            sb.append("0x").append(Long.toHexString(address));
        }
        sb.append(':').append(length);
        for (FetchArg a : args) sb.append(' ').append(a.name()).append('=').append(a.expression());
        return sb.toString();
    }
}
