package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * 100,000 random and mutated definitions: the parser (and, for accepted probes, compiling,
 * fetching and formatting) must only ever fail with ProbeSyntaxException, never hang, and
 * always put the caret inside (or one past) the echoed command.
 */
class ProbeParserFuzzTest {
    static final List<String> SEEDS = List.of(
            "p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring",
            "r:myret do_sys_openat2 ret=$retval",
            "r100:grp/ev vfs_read+0 $retval:s32 +0($retval):u8[4]",
            "p vfs_read +0(+8(+16($stack))):string[2] $stack3 $arg1 $comm \\\"imm\" \\0x10:u8",
            "p:g.e vfs_read+16 a=@jiffies-8:b4@4/32 b=@0xffff8880:x16[3] c=%ax:char d=%ax:symbol",
            "p do_sys_open%return $retval",
            "-:kprobes/myopen vfs_read arg1=%di",
            "p trace_printk:trace_printk_irq_work+4 +u8(%x1):string %x30 %lr %pstate %pc",
            "p 0xffffffff81001000 x=-0x10(%sp):s64 y=+0x10(%sp):b63@1/64[2]",
            "# comment only", "");
    static final String[] TOKENS = {"p", "r", "r10", "p:", ":", "/", ".", "grp", "ev", "vfs_read", "+", "-", "0x10",
            "%return", "%ret", "%", "%di", "%x0", "%ax", "%sp", "$", "$stack", "$stack1", "$arg1", "$arg", "$retval",
            "$comm", "@", "@0x10", "@jiffies", "+0(", "-8(", "+u0(", ")", "(", "\\", "\\\"", "\"", "\\1", ":", ":u8",
            ":string", ":ustring", ":symstr", ":symbol", ":b4@4/8", ":x16[4]", "[", "]", "=", "name=", " ", " ", " ",
            "\t", "#", "1", "0", "999999999999999999999", "-1", "é", "\u00a0"};

    @Test
    void hundredThousandInputs() {
        Random rnd = new Random(0x6b70656d75L);
        FakeKernel k = new FakeKernel();
        ProbeParser[] parsers = {
                new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, k), new ProbeParser(Arch.ARM64, Dialect.LINUX_6_1, k),
                new ProbeParser(Arch.X86_64, Dialect.MAINLINE, k), new ProbeParser(Arch.ARM64),
        };
        TraceFormatter fmt = new TraceFormatter(k);
        int accepted = 0, logged = 0;
        for (int n = 0; n < 100_000; n++) {
            String in = switch (n % 4) {
                case 0 -> randomChars(rnd);
                case 1 -> randomTokens(rnd);
                default -> mutate(rnd, SEEDS.get(rnd.nextInt(SEEDS.size())));
            };
            ProbeParser p = parsers[rnd.nextInt(parsers.length)];
            try {
                ProbeDefinition d = p.parse(in);
                if (d instanceof TraceProbe t) {
                    accepted++;
                    assertFalse(t.event().isEmpty());
                    assertNotNull(t.listing());
                    try {
                        CompiledProbe c = CompiledProbe.compile(t, p.arch(), k);
                        byte[] data = c.fetch(k);
                        if (data != null) {
                            String body = t.isReturn() ? fmt.kretprobeEvent(c, FakeKernel.KBASE + 0x1000, FakeKernel.KBASE + 0x2010, data)
                                    : fmt.kprobeEvent(c, FakeKernel.KBASE + 0x1000, data);
                            assertTrue(body.startsWith(t.event() + ": ("));
                        }
                        assertTrue(TraceFormatter.formatFile(c, 1).startsWith("name: "));
                    } catch (ProbeSyntaxException e) {
                        assertEquals(KernelError.BAD_PROBE_ADDR, e.error());
                    }
                }
            } catch (ProbeSyntaxException e) {
                if (e.logged()) {
                    logged++;
                    int len = e.command().getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
                    assertTrue(e.position() >= 0 && e.position() <= len + 1, () -> in + "\n" + e.errorLog());
                    assertTrue(e.errorLog().endsWith("^\n"));
                }
            }
        }
        assertTrue(accepted > 1000, "accepted " + accepted);
        assertTrue(logged > 10_000, "logged " + logged);
    }

    static String randomChars(Random r) {
        int len = r.nextInt(80);
        StringBuilder sb = new StringBuilder();
        String alphabet = "pr-:/.%$@+-()\\\"[]=#: 0123456789abcdefxu_sbtkgvnmlio\t";
        for (int i = 0; i < len; i++) {
            int pick = r.nextInt(20);
            if (pick == 0) sb.append((char) r.nextInt(0x250));
            else sb.append(alphabet.charAt(r.nextInt(alphabet.length())));
        }
        return sb.toString();
    }

    static String randomTokens(Random r) {
        int len = 1 + r.nextInt(14);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < len; i++) sb.append(TOKENS[r.nextInt(TOKENS.length)]);
        return sb.toString();
    }

    static String mutate(Random r, String s) {
        StringBuilder sb = new StringBuilder(s);
        int edits = 1 + r.nextInt(4);
        for (int e = 0; e < edits; e++) {
            int op = r.nextInt(4);
            int pos = sb.isEmpty() ? 0 : r.nextInt(sb.length() + 1);
            switch (op) {
                case 0 -> { if (pos < sb.length()) sb.deleteCharAt(pos); }
                case 1 -> sb.insert(pos, TOKENS[r.nextInt(TOKENS.length)]);
                case 2 -> { if (pos < sb.length()) sb.setCharAt(pos, (char) (32 + r.nextInt(95))); }
                default -> { if (r.nextInt(10) == 0) sb.append(" \\1".repeat(r.nextInt(140))); else sb.insert(pos, "+0(".repeat(r.nextInt(20))); }
            }
        }
        return sb.toString();
    }
}
