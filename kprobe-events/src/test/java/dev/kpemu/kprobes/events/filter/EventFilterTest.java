package dev.kpemu.kprobes.events.filter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.events.EventArg;
import dev.kpemu.kprobes.events.EventFields;
import dev.kpemu.kprobes.events.FetchType;
import dev.kpemu.kprobes.events.ProbeDefinition;
import dev.kpemu.kprobes.events.ProbeParser;
import dev.kpemu.kprobes.events.TraceContext;
import dev.kpemu.kprobes.events.TraceProbe;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Filter semantics written by hand from Linux 6.1's trace_events_filter.c and
 * Documentation/trace/events.rst: numbers compare at the field's size and signedness (the value
 * truncated to the field as {@code (type)pred->val}), {@code &} is a bit test, {@code ==} on
 * strings is exact and {@code ~} a glob ({@code *x}, {@code x*}, {@code *x*}, {@code ?}/{@code []},
 * a leading {@code !} inverts), {@code &&} binds tighter than {@code ||}, values read as
 * {@code kstrtoll}/{@code kstrtoull} base 0 (hex, octal, decimal).
 */
class EventFilterTest {
    private static final TraceProbe DEF = def("p:e do_sys_openat2 dfd=%di:s32 fn=+0(%si):ustring flags=%dx:u16");

    private static TraceProbe def(String text) {
        try {
            for (ProbeDefinition d : new ProbeParser(Arch.X86_64).parseAll(text)) return (TraceProbe) d;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
        throw new AssertionError(text);
    }

    private static TraceRecord record(long dfd, String fn, long flags, int pid, String comm) {
        return new TraceRecord("kprobes", "e", new TraceContext(comm, pid, 0, ".....", 0), "e: (x)", false, 0x1000, 0, 2000,
                List.of(new EventArg("dfd", FetchType.S32, 0, dfd, null), new EventArg("fn", FetchType.USTRING, 0, fn, null),
                        new EventArg("flags", FetchType.U16, 0, flags, null)));
    }

    private static boolean matches(String filter, TraceRecord r) throws FilterParseException {
        return EventFilter.parse(filter, EventFields.of(DEF)).matches(r);
    }

    @Test
    void numbersCompareAtTheFieldsSizeAndSign() throws Exception {
        TraceRecord r = record(-100, "/tmp/a.txt", 0x8241, 7, "cat");
        assertEquals(true, matches("dfd < 0", r), "s32 is signed");
        assertEquals(true, matches("dfd == -100", r));
        assertEquals(true, matches("dfd == 0xffffff9c", r), "the value is cut to the field's 32 bits");
        assertEquals(true, matches("flags == 0x18241", r), "the value is cut to the field's 16 bits");
        assertEquals(true, matches("flags & 0x40", r));
        assertEquals(false, matches("flags & 0x80", r));
        assertEquals(true, matches("flags == 0101101", r), "leading 0: octal");
        assertEquals(true, matches("common_pid >= 7 && common_pid <= 7", r));
        assertEquals(true, matches("cpu == 0", r));
    }

    @Test
    void stringsMatchExactlyOrAsGlobs() throws Exception {
        TraceRecord r = record(-100, "/tmp/a.txt", 0, 7, "cat");
        assertEquals(true, matches("fn == \"/tmp/a.txt\"", r));
        assertEquals(false, matches("fn == \"/tmp/*\"", r), "== does not glob");
        assertEquals(true, matches("fn ~ \"/tmp/*\"", r));
        assertEquals(true, matches("fn ~ \"*.txt\"", r));
        assertEquals(true, matches("fn ~ \"*a.t*\"", r));
        assertEquals(true, matches("fn ~ \"/tmp/?.[st]xt\"", r));
        assertEquals(false, matches("fn ~ \"!/tmp/*\"", r), "a leading ! inverts the glob");
        assertEquals(true, matches("fn != 'other'", r));
        assertEquals(true, matches("comm == \"cat\" && COMM ~ \"c*\"", r));
    }

    /**
     * Strings compare as the kernel's bytes (issue 32): {@code glob_match}'s {@code ?} is one byte,
     * so a two-byte character takes two, and a byte that is not UTF-8 (carried as
     * {@link dev.kpemu.kprobes.events.GuestText} does) is one; {@code [..]} ranges are byte values.
     */
    @Test
    void stringsCompareAsBytes() throws Exception {
        TraceRecord r = record(-100, "/tmp/\u03c0x\udcff", 0, 7, "\udcffc\u03c0\udce1");
        assertEquals(true, matches("fn == \"/tmp/\u03c0x\udcff\"", r));
        assertEquals(false, matches("fn == \"/tmp/\u03c0x\ufffd\"", r), "U+FFFD is not the byte 0xff");
        assertEquals(true, matches("fn ~ \"/tmp/??x?\"", r), "pi is two bytes, 0xff one");
        assertEquals(false, matches("fn ~ \"/tmp/?x*\"", r));
        assertEquals(true, matches("fn ~ \"*x[\udcf0-\udcff]\"", r), "a byte range (the filter's own bytes 0xf0-0xff): the 0xff byte");
        assertEquals(false, matches("fn ~ \"*x[\u00f0-\u00ff]\"", r), "U+00F0-U+00FF are two bytes each in the filter's UTF-8");
        assertEquals(true, matches("comm ~ \"?c*\"", r));
    }

    @Test
    void andBindsTighterThanOrAndNotInverts() throws Exception {
        TraceRecord r = record(3, "x", 0, 1, "sh");
        assertEquals(true, matches("dfd == 3 || dfd == 4 && common_pid == 9", r), "a || (b && c)");
        assertEquals(false, matches("(dfd == 3 || dfd == 4) && common_pid == 9", r));
        assertEquals(false, matches("!(dfd == 3)", r));
        assertEquals(true, matches("!dfd == 4", r), "! applies to the predicate");
    }

    @Test
    void badValuesAreRefused() {
        EventFields f = EventFields.of(DEF);
        assertEquals(FilterParseException.Error.ILLEGAL_INTVAL, assertThrows(FilterParseException.class, () -> EventFilter.parse("flags == -1", f)).error(),
                "an unsigned field takes no minus sign (kstrtoull)");
        assertEquals(FilterParseException.Error.ILLEGAL_INTVAL, assertThrows(FilterParseException.class, () -> EventFilter.parse("dfd == 09", f)).error(),
                "9 is not an octal digit");
        assertEquals(FilterParseException.Error.ILLEGAL_FIELD_OP, assertThrows(FilterParseException.class, () -> EventFilter.parse("dfd ~ 3", f)).error());
    }

    /** A filter parsed as the kernel of {@code dialect} does, matched against a record of cpu {@code cpu}. */
    private static boolean matchesOnCpu(String filter, FilterDialect dialect, int cpu) throws FilterParseException {
        TraceRecord r = new TraceRecord("kprobes", "e", new TraceContext("cat", 7, cpu, ".....", 0), "e: (x)", false, 0x1000, 0, 2000,
                List.of(new EventArg("dfd", FetchType.S32, 0, 3L, null), new EventArg("fn", FetchType.USTRING, 0, "/a", null),
                        new EventArg("flags", FetchType.U16, 0, 0L, null)));
        return EventFilter.parse(filter, EventFields.of(DEF), dialect).matches(r);
    }

    private static FilterParseException.Error refusal(String filter, FilterDialect dialect) {
        return assertThrows(FilterParseException.class, () -> EventFilter.parse(filter, EventFields.of(DEF), dialect)).error();
    }

    /** CPUS{} (Linux 6.6+: 6.12 and 7.2 here), as do_filter_scalar_cpumask and parse_pred define it. */
    @Test
    void cpulistsOnTheCpuAndNumberFieldsFromLinux66() throws Exception {
        FilterDialect d = FilterDialect.LINUX_6_12;
        assertEquals(true, matchesOnCpu("cpu & CPUS{0-1}", d, 1));
        assertEquals(false, matchesOnCpu("cpu & CPUS{0-1}", d, 2));
        assertEquals(true, matchesOnCpu("CPU & CPUS{0,2-3}", d, 3));
        assertEquals(true, matchesOnCpu("cpu == CPUS{2}", d, 2), "one cpu compares as a number");
        assertEquals(true, matchesOnCpu("cpu & CPUS{2}", d, 2), "& of one cpu is ==");
        assertEquals(false, matchesOnCpu("cpu == CPUS{1-2}", d, 2), "== holds only for a list of that cpu alone");
        assertEquals(true, matchesOnCpu("cpu != CPUS{1-2}", d, 2));
        assertEquals(true, matchesOnCpu("cpu != CPUS{3}", d, 2));
        assertEquals(false, matchesOnCpu("common_pid & CPUS{0-15:2/4}", d, 0), "0-15:2/4 is 0-1,4-5,8-9,12-13: pid 7 is not in it");
        assertEquals(true, matchesOnCpu("common_pid & CPUS{4-7}", d, 0));
        assertEquals(true, matchesOnCpu("dfd & CPUS{1,3} && cpu == 0", d, 0), "a number field as a cpu");
        assertEquals(true, matchesOnCpu("cpu & CPUS{7} || cpu == 5", d, 5));
        assertEquals(FilterParseException.Error.ILLEGAL_FIELD_OP, refusal("fn & CPUS{1}", d));
        assertEquals(FilterParseException.Error.ILLEGAL_FIELD_OP, refusal("cpu < CPUS{1}", d));
        assertEquals(FilterParseException.Error.MISSING_BRACE_OPEN, refusal("cpu & CPUS1", d));
        assertEquals(FilterParseException.Error.MISSING_BRACE_CLOSE, refusal("cpu & CPUS{1", d));
        assertEquals(FilterParseException.Error.INVALID_CPULIST, refusal("cpu & CPUS{}", d));
        assertEquals(FilterParseException.Error.INVALID_CPULIST, refusal("cpu & CPUS{a}", d));
        assertEquals(FilterParseException.Error.INVALID_CPULIST, refusal("cpu & CPUS{3-1}", d));
        assertEquals(FilterParseException.Error.INVALID_VALUE, refusal("cpu & CPUS{1}", FilterDialect.LINUX_6_1), "6.1 has no cpulists");
        assertEquals(true, matchesOnCpu("cpu & CPUS{1}", FilterDialect.LINUX_7, 1));
    }
}
