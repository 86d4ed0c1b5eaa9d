package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.JumpOptimizer.State;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A million hits of one probe as a breakpoint probe and as an optimized probe give the same
 * handler calls (count, and a digest of the ip and registers each call saw) and the same final
 * registers. The optimized run starts queued and is optimized in the middle of the loop by the
 * delay, so it goes through all three paths: breakpoint + detour copy, the jump written at a safe
 * point (postponed while the pc is inside the region), and the detour.
 */
class OptimizedMillionHitsTest {
    static final long N = 1_000_000;

    record Run(long hits, long digest, Map<String, Long> registers) {}

    static Run run(Arch arch, boolean optimize) {
        try (EngineGuest g = new EngineGuest(arch, Functions.basic(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k).delay(Duration.ofMillis(1));
            k.optimization(optimize);
            String[] watched = arch == Arch.X86_64 ? new String[] {"rax", "rbx", "rcx", "rsp", "rflags"}
                    : new String[] {"x0", "x1", "x2", "sp", "pstate"};
            long[] acc = {0, 0};
            long probe = g.sym("mul_loop") + (arch == Arch.X86_64 ? 0x11 : 0xc);
            k.register(Kprobe.at(probe).pre((p, r) -> {
                long h = acc[1] * 31 + r.ip();
                for (String n : watched) h = h * 1_000_003 + r.get(n);
                acc[1] = h;
                acc[0]++;
                return 0;
            }));
            g.call("mul_loop", N);
            if (optimize) {
                assertEquals(State.OPTIMIZED, o.state(probe));
                assertEquals(1, o.jumpsWritten());
            } else {
                assertEquals(State.BREAKPOINT, o.state(probe));
            }
            assertEquals(0, k.handlerFailures());
            Map<String, Long> regs = new LinkedHashMap<>();
            for (String n : k.regs().names()) regs.put(n, k.regs().get(n));
            return new Run(acc[0], acc[1], regs);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void sameHandlerCallsAndFinalState(Arch arch) {
        Run bp = run(arch, false);
        Run opt = run(arch, true);
        assertEquals(N, bp.hits());
        assertEquals(N, opt.hits());
        assertEquals(bp.digest(), opt.digest());
        assertEquals(bp.registers(), opt.registers());
    }
}
