package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.kprobes.GuestFunctionCall;
import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.JumpOptimizer.State;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The life of an optimized probe through the engine, on both arches: queued (breakpoint hits take
 * the detour's displaced code), optimized after the delay or a flush, the ip handlers see, ip changes
 * ignored, reentry, unoptimized by a second probe in the region (x86), a post handler, disable and
 * {@code debug.kprobes_optimization} = 0 and re-optimized when each clears, {@code [OPTIMIZED]} in the
 * list, the text restored byte for byte on unregister and the detour memory freed.
 */
class OptimizedLifecycleTest {

    static Map<String, String> functions(Arch arch) {
        Map<String, String> f = Functions.basic(arch);
        f.put("answer", arch == Arch.X86_64 ? "mov $42, %eax\nret\n" : "mov x0, #42\nret\n");
        return f;
    }

    /** The bytes at the probe site as the engine and optimizer left them. */
    static byte[] site(EngineGuest g, long address, int len) {
        return g.machine.readVirtual(address, len);
    }

    @org.junit.jupiter.api.Timeout(30)
    @ParameterizedTest
    @EnumSource(Arch.class)
    void lifecycle(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, functions(arch)); Kprobes k = g.kprobes()) {
            long p = g.sym("prologue");
            byte[] original = g.text("prologue");
            GuestFunctionCall guest = GuestFunctionCall.on(k);
            int baseSlots = k.slotsInUse();
            JumpOptimizer o = JumpOptimizer.attach(k);
            long trapIp = arch == Arch.X86_64 ? p + 1 : p;
            List<Long> ips = new ArrayList<>();
            boolean[] redirect = {false};
            boolean[] reenter = {false};
            long[] nested = {0};
            Kprobe kp = Kprobe.at("prologue", 0).pre((pr, r) -> {
                ips.add(r.ip());
                if (reenter[0]) nested[0] = guest.call(p, 5);
                if (redirect[0]) {
                    r.setIp(g.sym("answer"));
                    return 1;
                }
                return 0;
            });
            k.register(kp);

            // queued: Linux lists [OPTIMIZED] from here; the breakpoint is still in the text
            assertEquals(State.QUEUED, o.state(p));
            assertTrue(k.list().contains("prologue+0x0    [OPTIMIZED]"), k.list());
            DetourBuffer d = o.detour(p);
            assertNotNull(d);
            SitePatch patch = SitePatch.of(d);
            assertArrayEquals(patch.breakpoint(), site(g, p, patch.length()));
            assertEquals(10, g.call("prologue", 3));           // int3/BRK → handlers → detour's displaced code
            assertEquals(List.of(trapIp), ips);

            // optimized
            assertEquals(0, o.flush());
            assertEquals(State.OPTIMIZED, o.state(p));
            assertArrayEquals(patch.optimized(), site(g, p, patch.length()));
            assertEquals(13, g.call("prologue", 4));
            assertEquals(List.of(trapIp, trapIp), ips);
            assertEquals(String.format("%016x  k  prologue+0x0    [OPTIMIZED]%n", p), k.list());
            assertEquals(Kprobe.FLAG_OPTIMIZED, kp.flags() & Kprobe.FLAG_OPTIMIZED, "kp->flags as the list shows it");

            // a pre handler's ip change is ignored for an optimized probe
            redirect[0] = true;
            assertEquals(16, g.call("prologue", 5));
            redirect[0] = false;

            // reentry: a handler calling the probed function counts a miss and runs no handler
            reenter[0] = true;
            assertEquals(19, g.call("prologue", 6));
            reenter[0] = false;
            assertEquals(16, nested[0]);
            assertEquals(1, kp.nmissed());
            assertEquals(4, ips.size());

            if (arch == Arch.X86_64) {
                // a second probe inside the displaced region unoptimizes; both work as breakpoint probes
                int[] inner = {0};
                Kprobe second = Kprobe.at("prologue", 1).pre((pr, r) -> { inner[0]++; return 0; });
                k.register(second);
                assertEquals(State.BREAKPOINT, o.state(p));
                assertTrue(((Verdict.Refused) o.verdict(p)).has(Refusal.Reason.PROBE_IN_REGION));
                byte[] both = original.clone();
                both[0] = (byte) 0xcc;
                both[1] = (byte) 0xcc;
                assertArrayEquals(both, g.text("prologue"));
                // the second probe's own region (mov rbp,rsp; push r12) holds no other probe: it is optimizable, as on Linux
                assertEquals(State.QUEUED, o.state(p + 1));
                assertEquals(String.format("%016x  k  prologue+0x1    [OPTIMIZED]%n%016x  k  prologue+0x0    %n", p + 1, p), k.list());
                assertEquals(22, g.call("prologue", 7));
                assertEquals(1, inner[0]);
                assertEquals(5, ips.size());
                o.flush();
                assertEquals(State.OPTIMIZED, o.state(p + 1));
                assertEquals(State.BREAKPOINT, o.state(p));
                assertEquals(25, g.call("prologue", 8));          // the outer's boosted copy jumps back onto the inner's jump
                assertEquals(2, inner[0]);
                assertEquals(6, ips.size());
                k.unregister(second);
                assertEquals(State.QUEUED, o.state(p));
                assertEquals(0, o.flush());
                assertEquals(State.OPTIMIZED, o.state(p));
                assertEquals(28, g.call("prologue", 9));
                assertEquals(2, inner[0]);
                assertEquals(7, ips.size());
            }
            int hits = ips.size();

            // a post handler (aggregation) unoptimizes; the post handler runs after the step
            int[] post = {0};
            Kprobe withPost = Kprobe.at("prologue", 0).post((pr, r, f) -> post[0]++);
            k.register(withPost);
            assertEquals(State.BREAKPOINT, o.state(p));
            assertTrue(((Verdict.Refused) o.verdict(p)).has(Refusal.Reason.POST_HANDLER));
            assertArrayEquals(patch.breakpoint(), site(g, p, patch.length()));
            assertEquals(31, g.call("prologue", 10));
            assertEquals(1, post[0]);
            assertEquals(hits + 1, ips.size());
            k.unregister(withPost);
            assertEquals(State.QUEUED, o.state(p));
            o.flush();
            assertEquals(State.OPTIMIZED, o.state(p));

            // disabled: the text is original (disarmed), the probe unoptimized; enabling re-optimizes
            k.disable(kp);
            assertEquals(State.BREAKPOINT, o.state(p));
            assertArrayEquals(original, g.text("prologue"));
            assertTrue(k.list().contains("[DISABLED]") && !k.list().contains("[OPTIMIZED]"), k.list());
            assertEquals(Kprobe.FLAG_DISABLED, kp.flags() & (Kprobe.FLAG_DISABLED | Kprobe.FLAG_OPTIMIZED));
            assertEquals(34, g.call("prologue", 11));
            assertEquals(hits + 1, ips.size());
            k.enable(kp);
            assertEquals(State.QUEUED, o.state(p));
            o.flush();
            assertEquals(State.OPTIMIZED, o.state(p));
            assertArrayEquals(patch.optimized(), site(g, p, patch.length()));

            // debug.kprobes_optimization = 0: a breakpoint probe again, and its ip change is honoured
            k.optimization(false);
            assertEquals(State.BREAKPOINT, o.state(p));
            assertArrayEquals(patch.breakpoint(), site(g, p, patch.length()));
            redirect[0] = true;
            assertEquals(42, g.call("prologue", 12));
            redirect[0] = false;
            assertEquals(hits + 2, ips.size());
            k.optimization(true);
            assertEquals(State.QUEUED, o.state(p));
            o.flush();
            assertEquals(State.OPTIMIZED, o.state(p));
            assertEquals(40, g.call("prologue", 13));
            assertEquals(hits + 3, ips.size());
            for (long ip : ips) assertEquals(trapIp, ip);

            // unregister: the text byte for byte, the detour freed at the next safe point
            k.unregister(kp);
            assertArrayEquals(original, g.text("prologue"));
            assertEquals("", k.list());
            assertEquals(43, g.call("prologue", 14));
            assertEquals(hits + 3, ips.size());
            assertEquals(baseSlots, k.slotsInUse());
        }
    }

    /** Without a flush the jump is written at the first safe point after the delay of guest time. */
    @org.junit.jupiter.api.Timeout(30)
    @ParameterizedTest
    @EnumSource(Arch.class)
    void jumpWrittenAfterTheDelay(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, functions(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            assertEquals(JumpOptimizer.DEFAULT_DELAY, o.delay());
            o.delay(Duration.ofMillis(2));
            long p = g.sym("prologue");
            int[] hits = {0};
            k.register(Kprobe.at(p).pre((pr, r) -> { hits[0]++; return 0; }));
            assertEquals(10, g.call("prologue", 3));
            assertEquals(State.QUEUED, o.state(p));
            g.call("mul_loop", 100_000); 
                      // ≥ 500k instructions: a few slices, under 2 ms
            assertEquals(State.QUEUED, o.state(p));
            g.call("mul_loop", 400_000);                       // past 2 ms of guest time
            assertEquals(State.OPTIMIZED, o.state(p));
            assertEquals(13, g.call("prologue", 4));
            assertEquals(2, hits[0]);
            assertEquals(1, o.jumpsWritten());
        }
    }

    /** A kretprobe's entry probe optimized: the return address is swapped from the detour, the return handler sees the result. */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void kretprobeEntryOptimized(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, functions(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            List<Long> returned = new ArrayList<>();
            List<Long> entered = new ArrayList<>();
            dev.kpemu.kprobes.Kretprobe rp = dev.kpemu.kprobes.Kretprobe.at("prologue")
                    .entryHandler((ri, r) -> { entered.add(r.arg(0)); return 0; })
                    .handler((ri, r) -> { returned.add(r.returnValue()); return 0; });
            k.register(rp);
            o.flush();
            long p = g.sym("prologue");
            assertEquals(State.OPTIMIZED, o.state(p));
            assertTrue(k.list().contains("  r  prologue+0x0    [OPTIMIZED]"), k.list());
            assertEquals(10, g.call("prologue", 3));
            assertEquals(13, g.call("prologue", 4));
            assertEquals(List.of(3L, 4L), entered);
            assertEquals(List.of(10L, 13L), returned);
            assertEquals(0, k.outstandingInstances());
        }
    }

    /**
     * A fault raised by a displaced instruction's copy in the detour is handed to the guest at the
     * original instruction's address (so the guest's own fault handling sees kernel text, not slot
     * memory): the engine moves the pc before delivery, as for a stepped copy.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void faultInTheDetourCopyIsReportedAtTheOriginalAddress(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, functions(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            long p = g.sym("prologue");
            k.register(Kprobe.at(p).pre((pr, r) -> 0));
            o.flush();
            DetourBuffer d = o.detour(p);
            long copy = d.displacedCodeAddress();
            for (var insn : d.region().instructions()) {
                g.machine.setPc(copy);
                assertFalse(k.onFault(g.machine, copy, arch == Arch.X86_64 ? 14 : 0x25));
                assertEquals(insn.address(), g.machine.pc());
                copy += insn.length();
            }
            g.machine.setPc(d.handOffAddress());
            assertFalse(k.onFault(g.machine, d.handOffAddress(), 14));
            assertEquals(d.handOffAddress(), g.machine.pc());   // not a displaced instruction: left alone
        }
    }
}
