package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.JumpOptimizer;
import dev.kpemu.optprobes.Refusal;
import dev.kpemu.optprobes.Verdict;

/**
 * Jump optimization on Debian's booted kernels: probes on common kernel functions become
 * {@code [OPTIMIZED]} with the kernel's own tables, and the trace is the same as without it.
 */
@Tag("kernel")
class OptimizedKernelProbesTest {

    /** Probes of which at least the offset ones are optimizable; the +0 ones sit on ftrace sites. */
    static List<String> definitions(Arch arch) {
        return switch (arch) {
            case X86_64 -> List.of(
                    "p:myopen do_sys_openat2 dfd=%di",
                    "p:rd ksys_read+5 fd=%di count=%dx",
                    "p:wr vfs_write+5 count=%dx",
                    "r:rdret ksys_read ret=$retval",
                    // a function with __ex_table entries keeps its probe a breakpoint probe (strncpy_from_user,
                    // which this test used before, has no ftrace site: Linux refuses it as notrace)
                    "p:cp fault_in_readable+5");
            case ARM64 -> List.of(
                    "p:myopen do_sys_openat2 dfd=%x0",
                    "p:rd ksys_read+12 fd=%x0 count=%x2",
                    "p:wr vfs_write+12 count=%x2",
                    "r:rdret ksys_read ret=$retval");
        };
    }

    record Run(BootRunner.Result result, TracedBoot traced, String console, Map<Long, Verdict> verdicts) {}

    static Run boot(Arch arch, boolean optimize) throws Exception {
        return boot(arch, optimize, JumpOptimizer.DEFAULT_DELAY);
    }

    static Run boot(Arch arch, boolean optimize, Duration delay) throws Exception {
        TracedBoot traced = new TracedBoot(definitions(arch), null).optimize(optimize).optimizeDelay(delay);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, console, null), traced);
        JumpOptimizer opt = traced.optimizer();
        return new Run(r, traced, console.toString(StandardCharsets.ISO_8859_1), opt == null ? Map.of() : opt.verdicts());
    }

    /** An event without its timestamp. */
    static String body(TraceRecord r) {
        return r.context().comm() + "-" + r.context().pid() + " [" + r.context().cpu() + "] " + r.group() + "/" + r.event() + ": " + r.body();
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void optimizedProbesGiveTheSameTrace(Arch arch) throws Exception {
        check(arch, JumpOptimizer.DEFAULT_DELAY);
    }

    /**
     * No delay: the jumps are written at the first safe point after registration (the vCPU in user
     * mode or idle), so every hit of the offset probes comes through its jump.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyHitThroughTheJumpWithoutDelay(Arch arch) throws Exception {
        Run opt = check(arch, Duration.ZERO);
        long events = opt.traced().records().stream().filter(r -> r.event().equals("rd") || r.event().equals("wr")).count();
        long detour = detourHits(opt);
        assertEquals(events, detour, "every event of the optimized probes came through the jump");
    }

    static long detourHits(Run opt) {
        long detour = 0;
        for (var e : opt.verdicts().entrySet()) {
            if (e.getValue().optimizable()) detour += opt.traced().optimizer().detourHits(e.getKey());
        }
        return detour;
    }

    static Run check(Arch arch, Duration delay) throws Exception {
        Run opt = boot(arch, true, delay);
        System.out.println("[" + arch + "] " + opt.traced().optimizationInputs() + "\n  " + String.join("\n  ", opt.traced().optimizationInputs().notes()));
        System.out.println("[" + arch + "] list:\n" + opt.traced().kprobes().list());
        opt.verdicts().forEach((a, v) -> System.out.printf("[%s] %016x %s%n", arch, a, v));
        System.out.println("[" + arch + "] jumps written " + opt.traced().optimizer().jumpsWritten() + ", postponed by pc " + opt.traced().optimizer().postponedByPc());
        assertEquals(BootOutcome.POWERED_OFF, opt.result().outcome(), opt.result().status() + "\n" + String.join("\n", opt.result().lastLines()));
        String list = opt.traced().kprobes().list();
        String off = arch == Arch.X86_64 ? "0x5" : "0xc";
        assertTrue(list.lines().anyMatch(l -> l.contains("ksys_read+" + off) && l.endsWith("[OPTIMIZED]")), list);
        assertTrue(list.lines().anyMatch(l -> l.contains("vfs_write+" + off) && l.endsWith("[OPTIMIZED]")), list);
        // the entries are ftrace sites: breakpoint probes, as Linux (which puts an ftrace-based kprobe there)
        assertTrue(list.lines().noneMatch(l -> l.contains("do_sys_openat2+0x0") && l.contains("[OPTIMIZED]")), list);
        long detour = detourHits(opt);
        if (arch == Arch.X86_64) {
            Verdict v = opt.verdicts().entrySet().stream()
                    .filter(e -> list.lines().anyMatch(l -> l.startsWith(String.format("%016x", e.getKey())) && l.contains("fault_in_readable+0x5")))
                    .map(Map.Entry::getValue).findFirst().orElseThrow();
            assertTrue(v instanceof Verdict.Refused r && r.has(Refusal.Reason.EXCEPTION_TABLE_ENTRY), v.toString());
        }
        assertTrue(detour > 0, "the optimized probes were hit through their jumps");
        long optimizedEvents = opt.traced().records().stream().filter(r -> r.event().equals("rd") || r.event().equals("wr")).count();
        assertTrue(optimizedEvents > 0, "events from the optimized probes");
        System.out.println("[" + arch + "] delay " + delay + ": " + optimizedEvents + " events of the offset probes, " + detour + " through the jumps");
        Run plain = boot(arch, false);
        assertEquals(BootOutcome.POWERED_OFF, plain.result().outcome(), plain.result().status());
        List<String> a = opt.traced().records().stream().map(OptimizedKernelProbesTest::body).toList();
        List<String> b = plain.traced().records().stream().map(OptimizedKernelProbesTest::body).toList();
        System.out.println("[" + arch + "] events optimized " + a.size() + ", plain " + b.size());
        assertEquals(b, a);
        for (String bad : new String[] {"WARNING:", "BUG:", "Oops", "ftrace failed", "ftrace bug", "text_poke"}) {
            assertFalse(opt.console().contains(bad), "console shows '" + bad + "':\n" + opt.console());
        }
        return opt;
    }

    /**
     * An optimized probe removed mid-run: the jump is in the text while the probe is optimized, and
     * after unregistering the text is byte for byte what it was; the guest goes on to power off.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void unregisteringAnOptimizedProbeRestoresTheText(Arch arch) throws Exception {
        String fn = "ksys_read";
        int off = arch == Arch.X86_64 ? 5 : 12;
        List<String> defs = List.of("p:rd " + fn + "+" + off + (arch == Arch.X86_64 ? " fd=%di" : " fd=%x0"));
        TracedBoot traced = new TracedBoot(defs, null).optimize(true).optimizeDelay(Duration.ZERO);
        byte[][] text = new byte[3][];  // before registration, optimized, after removal
        boolean[] optimized = new boolean[1];
        dev.kpemu.boot.BootHooks hooks = new dev.kpemu.boot.BootHooks() {
            @Override public void ready(dev.kpemu.boot.LinuxGuest g) { traced.ready(g); }

            @Override public boolean breakpoint(dev.kpemu.boot.LinuxGuest g, long a) {
                long at = g.symbols().address(fn) + off;
                boolean registered = traced.events() != null;
                if (!registered) text[0] = g.machine().readVirtual(at, 8);
                boolean go = traced.breakpoint(g, a);
                if (registered || traced.events() == null) return go;   // before or after the registration
                traced.events().addListener(r -> {
                    if (traced.records().size() != 4) return;
                    g.machine().clock().schedule(g.machine().clock().liveNanos(), now -> {
                        text[1] = g.machine().readVirtual(at, 8);
                        optimized[0] = traced.kprobes().list().contains("[OPTIMIZED]");
                        traced.events().disableAll();
                        try {
                            traced.events().truncate();
                        } catch (dev.kpemu.kprobes.events.ProbeSyntaxException e) {
                            throw new IllegalStateException(e);
                        }
                        text[2] = g.machine().readVirtual(at, 8);
                    });
                });
                return go;
            }
        };
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, console, null), hooks);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + console.toString(StandardCharsets.ISO_8859_1));
        assertTrue(optimized[0], "optimized when removed");
        if (arch == Arch.X86_64) {
            assertEquals((byte) 0xe9, text[1][0], "a jmp rel32 at the probe");
        } else {
            int w = java.nio.ByteBuffer.wrap(text[1], 0, 4).order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt();
            assertEquals(0x14000000, w & 0xfc000000, "a B at the probe: " + Integer.toHexString(w));
        }
        org.junit.jupiter.api.Assertions.assertArrayEquals(text[0], text[2], "after unregistering, the text is byte for byte what it was");
        assertEquals(4, traced.records().size(), "no event after the probe was removed");
        String con = console.toString(StandardCharsets.ISO_8859_1);
        for (String bad : new String[] {"WARNING:", "BUG:", "Oops"}) assertFalse(con.contains(bad), con);
    }
}
