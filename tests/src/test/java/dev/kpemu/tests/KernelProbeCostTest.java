package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.cli.TracedBoot;
import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.machine.Arch;

/**
 * Per-hit cost of kprobes with a trivial (counting) handler on a booted kernel: the same boot
 * without extra probes, with breakpoint probes, and with the same probes jump-optimized (no delay),
 * best of {@value #REPS} host times each; (T - T_none) / hits. Run with {@code -Dkpemu.bench=true}.
 */
@Tag("kernel")
@EnabledIfSystemProperty(named = "kpemu.bench", matches = "true")
class KernelProbeCostTest {
    static final int REPS = 3;

    static List<String> hot(Arch arch) {
        return switch (arch) {
            case X86_64 -> List.of("__rcu_read_lock+5", "page_add_file_rmap+5", "next_uptodate_page+5", "page_remove_rmap+5");
            case ARM64 -> List.of("page_add_file_rmap+12", "next_uptodate_page+12", "page_remove_rmap+12");
        };
    }

    record Timing(long hostNanos, long hits, long detourHits) {}

    static Timing boot(Arch arch, Boolean optimize, boolean probes) throws Exception {
        TracedBoot traced = new TracedBoot(List.of("p:x do_sys_openat2"), null).optimize(Boolean.TRUE.equals(optimize))
                .optimizeDelay(java.time.Duration.ZERO);
        long[] hits = new long[1];
        List<Long> addrs = new java.util.ArrayList<>();
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest g) { traced.ready(g); }

            @Override public boolean breakpoint(LinuxGuest g, long a) {
                boolean go = traced.breakpoint(g, a);
                if (probes) {
                    for (String p : hot(arch)) {
                        int plus = p.indexOf('+');
                        Kprobe k = Kprobe.at(p.substring(0, plus), Long.parseLong(p.substring(plus + 1))).pre((kp, r) -> {
                            hits[0]++;
                            return 0;
                        });
                        traced.kprobes().register(k);
                        addrs.add(k.address());
                    }
                    traced.watchReturnToUser(g.machine());
                }
                return go;
            }
        };
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, new ByteArrayOutputStream(), null), hooks);
        assertEquals(BootRunner.EXIT_POWERED_OFF, r.exitCode(), r.status());
        long detour = 0;
        if (traced.optimizer() != null) for (long a : addrs) detour += traced.optimizer().detourHits(a);
        return new Timing(r.hostNanos(), hits[0], detour);
    }

    static Timing best(Arch arch, Boolean optimize, boolean probes) throws Exception {
        Timing best = null;
        for (int i = 0; i < REPS; i++) {
            Timing t = boot(arch, optimize, probes);
            if (best == null || t.hostNanos() < best.hostNanos()) best = t;
        }
        return best;
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void perHitCost(Arch arch) throws Exception {
        Timing none = best(arch, false, false);
        Timing bp = best(arch, false, true);
        Timing opt = best(arch, true, true);
        assertTrue(bp.hits() > 10_000, "hot probes: " + bp.hits());
        System.out.printf("[%s] none %.3f s; breakpoint %.3f s, %d hits: %.2f us/hit; optimized %.3f s, %d hits (%d through jumps): %.2f us/hit%n",
                arch, none.hostNanos() / 1e9, bp.hostNanos() / 1e9, bp.hits(), (bp.hostNanos() - none.hostNanos()) / 1e3 / bp.hits(),
                opt.hostNanos() / 1e9, opt.hits(), opt.detourHits(), (opt.hostNanos() - none.hostNanos()) / 1e3 / opt.hits());
    }
}
