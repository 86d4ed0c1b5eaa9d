package dev.kpemu.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Micro-benchmarks of the Unicorn binding that every probe hit pays for: an interrupt-hook round
 * trip, a register read, a one-instruction step, and a stop + restart. Each figure is the median
 * over {@code batches} batches of {@code perBatch} operations, in nanoseconds of the thread's CPU
 * time per operation.
 */
public final class UnicornBench {
    public record Result(Arch arch, String operation, double medianNanos, double minNanos, double maxNanos, int batches, int perBatch) {}

    private static final long CODE = 0x1000;
    private static final long NEVER = 0x7fff_dead_beef_0000L;

    private UnicornBench() {}

    public static List<Result> run(Arch arch, int batches, int perBatch) {
        List<Result> out = new ArrayList<>();
        out.add(measure(arch, "interrupt-hook round trip (trap, empty hook, continue)", batches, perBatch, UnicornBench::trapRoundTrip));
        out.add(measure(arch, "interrupt-hook round trip, the hook writing pc", batches, perBatch, UnicornBench::trapRoundTripSettingPc));
        out.add(measure(arch, "register read (pc)", batches, perBatch, UnicornBench::registerReads));
        out.add(measure(arch, "batch read of 22 registers (one call)", batches, perBatch, UnicornBench::registerBatchReads));
        out.add(measure(arch, "one-instruction step (count=1) + pc read", batches, perBatch, UnicornBench::singleSteps));
        out.add(measure(arch, "stop in hook + restart", batches, perBatch, UnicornBench::stopRestart));
        return out;
    }

    /** CPU time of the calling thread, which runs the engine (wall time counts waits for a core). */
    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    private interface Body { void run(Unicorn uc, Arch arch, int n); }

    private static Result measure(Arch arch, String name, int batches, int perBatch, Body body) {
        try (Unicorn uc = open(arch)) {
            body.run(uc, arch, perBatch); // warm-up: translation, JIT
            double[] ns = new double[batches];
            for (int b = 0; b < batches; b++) {
                long t0 = THREADS.getCurrentThreadCpuTime();
                body.run(uc, arch, perBatch);
                ns[b] = (THREADS.getCurrentThreadCpuTime() - t0) / (double) perBatch;
            }
            Arrays.sort(ns);
            return new Result(arch, name, ns[batches / 2], ns[0], ns[batches - 1], batches, perBatch);
        }
    }

    /** x86: int3; jmp back.  arm64: brk #0; b back (the hook moves PC past the BRK). */
    private static Unicorn open(Arch arch) {
        Unicorn uc;
        byte[] code;
        if (arch == Arch.X86_64) {
            uc = dev.kpemu.machine.x86.X86Machine.openEngine();
            code = new byte[] {(byte) 0xcc, (byte) 0xeb, (byte) 0xfd};
        } else {
            uc = Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM, Unicorn.CPU_ARM64_A57);
            code = new byte[] {0x00, 0x00, 0x20, (byte) 0xd4, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0x17};
        }
        uc.memMap(0, 0x10000, Unicorn.PROT_ALL);
        uc.memWrite(CODE, code);
        return uc;
    }

    private static int pcReg(Arch arch) { return arch == Arch.X86_64 ? X86Reg.RIP : Arm64Reg.PC; }

    private static void trapRoundTrip(Unicorn uc, Arch arch, int n) {
        int[] left = {n};
        Unicorn.Hook h = uc.hookInterrupt((u, intno) -> {
            if (arch == Arch.ARM64) u.regWrite(Arm64Reg.PC, CODE + 4);
            if (--left[0] == 0) u.stop();
        });
        uc.start(CODE, NEVER, 0, 0);
        uc.delete(h);
    }

    /** A probe hit's minimum: the trap, the upcall, and the new pc written from the hook (on arm64 as above). */
    private static void trapRoundTripSettingPc(Unicorn uc, Arch arch, int n) {
        int[] left = {n};
        Unicorn.Hook h = uc.hookInterrupt((u, intno) -> {
            if (arch == Arch.ARM64) u.regWrite(Arm64Reg.PC, CODE + 4);
            else u.regWrite(X86Reg.RIP, CODE + 1);
            if (--left[0] == 0) u.stop();
        });
        uc.start(CODE, NEVER, 0, 0);
        uc.delete(h);
    }

    private static void registerReads(Unicorn uc, Arch arch, int n) {
        int reg = pcReg(arch);
        long sink = 0;
        for (int i = 0; i < n; i++) sink += uc.regRead(reg);
        if (sink == 42) System.out.print("");
    }

    private static void registerBatchReads(Unicorn uc, Arch arch, int n) {
        int[] regs = new int[22];   // x86: the 16 GPRs, rip, rflags, cs, ss, fs_base, gs_base; arm64: x0-x21
        int[] x86 = {X86Reg.RAX, X86Reg.RCX, X86Reg.RDX, X86Reg.RBX, X86Reg.RSP, X86Reg.RBP, X86Reg.RSI, X86Reg.RDI,
            X86Reg.RIP, X86Reg.RFLAGS, X86Reg.CS, X86Reg.SS, X86Reg.FS_BASE, X86Reg.GS_BASE};
        for (int i = 0; i < regs.length; i++) {
            if (arch == Arch.ARM64) regs[i] = Arm64Reg.X0 + i;
            else regs[i] = i < x86.length ? x86[i] : X86Reg.R8 + (i - x86.length);
        }
        Unicorn.RegisterBatch batch = uc.registerBatch(regs);
        long[] out = new long[regs.length];
        long sink = 0;
        for (int i = 0; i < n; i++) {
            batch.read(out);
            sink += out[0];
        }
        if (sink == 42) System.out.print("");
    }

    private static void singleSteps(Unicorn uc, Arch arch, int n) {
        // a self-loop: x86 "jmp ." / arm64 "b ."
        long at = CODE + 0x100;
        uc.memWrite(at, arch == Arch.X86_64 ? new byte[] {(byte) 0xeb, (byte) 0xfe} : new byte[] {0, 0, 0, 0x14});
        int reg = pcReg(arch);
        long pc = at;
        for (int i = 0; i < n; i++) {
            uc.start(pc, NEVER, 0, 1);
            pc = uc.regRead(reg);
        }
    }

    private static void stopRestart(Unicorn uc, Arch arch, int n) {
        Unicorn.Hook h = uc.hookInterrupt((u, intno) -> {
            if (arch == Arch.ARM64) u.regWrite(Arm64Reg.PC, CODE + 4);
            u.stop();
        });
        int reg = pcReg(arch);
        long pc = CODE;
        for (int i = 0; i < n; i++) {
            uc.start(pc, NEVER, 0, 0);
            pc = uc.regRead(reg);
        }
        uc.delete(h);
    }
}
