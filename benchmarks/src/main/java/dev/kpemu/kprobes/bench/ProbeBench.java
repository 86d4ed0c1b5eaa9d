package dev.kpemu.kprobes.bench;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Consumer;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.Kretprobe;
import dev.kpemu.kprobes.SlotArea;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Per-hit cost of kprobes, measured the way Documentation/trace/kprobes.rst does: a loop calling
 * {@code target(v) = v / 3} many times, probed and unprobed, with a trivial Java handler. Each
 * variant runs {@code batches} batches of {@code calls} calls; the figure is
 * (median probed batch − median unprobed batch) / calls.
 *
 * <p>Variants: kprobe stepped out of line (boosting off: the copy ends with a trap), boosted
 * kprobe (the copy ends with a jump back), kretprobe (boosted entry probe + trampoline trap).
 * The guest is bare metal; the probe sits on the function's first instruction
 * ({@code push %rbp} / {@code stp x29, x30, [sp, #-16]!}).
 *
 * <p>With an optimizer ({@link #run(Arch, int, int, Consumer)}, given by module {@code optprobes},
 * which this module cannot depend on) a fourth variant is measured in the same run: the same
 * kprobe jump-optimized (the optimizer is attached after registration and must leave the jump
 * written).
 */
public final class ProbeBench {
    private ProbeBench() {}

    /** Median µs: per loop iteration unprobed, and per hit added by each probe kind. */
    public record Result(Arch arch, int calls, int batches, double unprobedLoop, double kprobe, double boosted, double kretprobe,
                         double optimized) {
        public Result(Arch arch, int calls, int batches, double unprobedLoop, double kprobe, double boosted, double kretprobe) {
            this(arch, calls, batches, unprobedLoop, kprobe, boosted, kretprobe, Double.NaN);
        }

        public String format() {
            String opt = Double.isNaN(optimized) ? "" : String.format(" | optimized %.3f µs/hit", optimized);
            return String.format("%-7s unprobed loop %.3f µs/call | kprobe %.3f µs/hit | boosted %.3f µs/hit%s | kretprobe %.3f µs/hit"
                    + "  (median of %d batches of %d calls)", arch.linuxName(), unprobedLoop, kprobe, boosted, opt, kretprobe, batches, calls);
        }
    }

    // x86-64 at 0x100000: driver(n) { do target(n) while (--n); hlt }, target at +0x20 (as/objdump).
    private static final byte[] X86_CODE = HexFormat.of().parseHex(
            "534889fb4889dfe81400000048ffcb75f35bf4ebeb66662e0f1f840000000000554889e54889f831d2b90300000048f7f15dc3");
    private static final long X86_TEXT = 0x10_0000, X86_TARGET = X86_TEXT + 0x20, X86_SLOTS = 0xe0_0000, X86_STACK = 0x8_0000;

    // arm64 at RAM+0x100000 (MMU off): driver at +0, target at +0x40.
    private static final int[] ARM64_DRIVER = {
        0xa9bf7bfd, 0x910003fd, 0xaa0003f3,     // stp x29, x30, [sp, #-16]!; mov x29, sp; mov x19, x0
        0xaa1303e0, 0x9400000c, 0xf1000673,     // loop: mov x0, x19; bl target; subs x19, x19, #1
        0x54ffffa1, 0xa8c17bfd, 0xd503207f,     // b.ne loop; ldp x29, x30, [sp], #16; wfi
        0x17ffffff,                             // b .-4
    };
    private static final int[] ARM64_TARGET = {
        0xa9bf7bfd, 0x910003fd, 0xd2800061,     // stp x29, x30, [sp, #-16]!; mov x29, sp; mov x1, #3
        0x9ac10800, 0xa8c17bfd, 0xd65f03c0,     // udiv x0, x0, x1; ldp x29, x30, [sp], #16; ret
    };
    private static final long A_TEXT = Arm64Layout.RAM_BASE + 0x10_0000, A_TARGET = A_TEXT + 0x40;
    private static final long A_SLOTS = Arm64Layout.RAM_BASE + 0x20_0000, A_STACK = Arm64Layout.RAM_BASE + 0x8_0000;

    public static Result run(Arch arch) { return run(arch, 100_000, 9); }

    public static Result run(Arch arch, int calls, int batches) {
        return run(arch, calls, batches, null);
    }

    /**
     * As {@link #run(Arch, int, int)}, plus the optimized variant when {@code optimizer} is not
     * null: it is called with the engine after the kprobe is registered and must attach jump
     * optimization and write the jump (e.g. {@code k -> JumpOptimizer.attach(k).flush()}).
     */
    public static Result run(Arch arch, int calls, int batches, Consumer<Kprobes> optimizer) {
        // Warm-up: the hit path is Java code reached through FFM upcalls; measure it JIT-compiled.
        for (Variant v : Variant.values()) {
            if (v != Variant.OPTIMIZED || optimizer != null) measure(arch, Math.max(1, calls / 4), 3, v, optimizer);
        }
        double base = measure(arch, calls, batches, Variant.NONE, null);
        double k = measure(arch, calls, batches, Variant.KPROBE, null);
        double b = measure(arch, calls, batches, Variant.BOOSTED, null);
        double o = optimizer == null ? Double.NaN : measure(arch, calls, batches, Variant.OPTIMIZED, optimizer);
        double r = measure(arch, calls, batches, Variant.KRETPROBE, null);
        return new Result(arch, calls, batches, base / calls, (k - base) / calls, (b - base) / calls, (r - base) / calls,
                (o - base) / calls);
    }

    private enum Variant { NONE, KPROBE, BOOSTED, KRETPROBE, OPTIMIZED }

    /**
     * CPU time of the emulating thread (Unicorn runs on it): on a shared machine wall time also
     * counts the time the thread waits for a core, which moved medians by more than the costs.
     */
    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    /** Median µs of CPU time of one batch. */
    private static double measure(Arch arch, int calls, int batches, Variant v, Consumer<Kprobes> optimizer) {
        try (Machine m = machine(arch)) {
            long target = arch == Arch.X86_64 ? X86_TARGET : A_TARGET;
            SlotArea slots = arch == Arch.X86_64 ? new SlotArea(X86_SLOTS, X86_SLOTS, 0x10_0000) : new SlotArea(A_SLOTS, A_SLOTS, 0x10_0000);
            SymbolResolver syms = SymbolResolver.of(List.of(
                    new SymbolResolver.SymbolInfo("driver", target - (arch == Arch.X86_64 ? 0x20 : 0x40), arch == Arch.X86_64 ? 0x20 : 0x40, true),
                    // the target's exact size, as kallsyms gives it (the optimizer decodes the whole function)
                    new SymbolResolver.SymbolInfo("target", target, arch == Arch.X86_64 ? X86_CODE.length - 0x20 : 4 * ARM64_TARGET.length, true)));
            long[] hits = {0};
            try (Kprobes k = Kprobes.attach(m, syms, slots)) {
                k.watchText(false);
                switch (v) {
                    case NONE -> { }
                    case KPROBE -> {
                        k.boosting(false);
                        k.register(Kprobe.at("target", 0).pre((p, regs) -> { hits[0]++; return 0; }));
                    }
                    case BOOSTED -> k.register(Kprobe.at("target", 0).pre((p, regs) -> { hits[0]++; return 0; }));
                    case KRETPROBE -> k.register(Kretprobe.at("target").handler((ri, regs) -> { hits[0]++; return 0; }));
                    case OPTIMIZED -> {
                        k.register(Kprobe.at("target", 0).pre((p, regs) -> { hits[0]++; return 0; }));
                        optimizer.accept(k);
                        if (!k.isOptimized(target)) throw new IllegalStateException("the bench probe was not optimized");
                    }
                }
                double[] t = new double[batches];
                runBatch(m, arch, calls); // warm-up: translation, JIT
                for (int i = 0; i < batches; i++) {
                    long t0 = THREADS.getCurrentThreadCpuTime();
                    runBatch(m, arch, calls);
                    t[i] = (THREADS.getCurrentThreadCpuTime() - t0) / 1e3;
                }
                if (v != Variant.NONE && hits[0] != (long) calls * (batches + 1)) {
                    throw new IllegalStateException(v + ": " + hits[0] + " hits, expected " + (long) calls * (batches + 1));
                }
                Arrays.sort(t);
                return t[batches / 2];
            }
        }
    }

    private static void runBatch(Machine m, Arch arch, int calls) {
        if (arch == Arch.X86_64) {
            m.engine().regWrite(X86Reg.RDI, calls);
            m.engine().regWrite(X86Reg.RSP, X86_STACK);
            m.setPc(X86_TEXT);
        } else {
            m.engine().regWrite(Arm64Reg.X0, calls);
            m.engine().regWrite(Arm64Reg.SP, A_STACK);
            m.setPc(A_TEXT);
        }
        StopReason r = m.run(Long.MAX_VALUE / 4);
        if (!(r instanceof StopReason.Halted)) throw new IllegalStateException("bench guest stopped with " + r);
    }

    private static Machine machine(Arch arch) {
        if (arch == Arch.X86_64) {
            X86Machine m = X86Machine.create(16 << 20);
            X86LongMode.identityMap(m.memory(), 0x1000, 16 << 20);
            int limit = X86LongMode.writeGdt(m.memory(), 0x5000);
            X86LongMode.enter(m.engine(), 0x5000, limit, 0x1000);
            m.memory().write(X86_TEXT, X86_CODE);
            return m;
        }
        Arm64Machine m = Arm64Machine.create(16 << 20);
        m.memory().write(A_TEXT, words(ARM64_DRIVER));
        m.memory().write(A_TARGET, words(ARM64_TARGET));
        return m;
    }

    private static byte[] words(int[] w) {
        byte[] b = new byte[w.length * 4];
        for (int i = 0; i < w.length; i++) for (int k = 0; k < 4; k++) b[4 * i + k] = (byte) (w[i] >>> (8 * k));
        return b;
    }

    /** Prints the figures for both arches. */
    public static void main(String[] args) {
        for (Arch a : Arch.values()) System.out.println(run(a).format());
    }
}
