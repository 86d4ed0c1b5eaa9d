package dev.kpemu.cli;

import java.io.OutputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * {@code kpemu bench watch}: what data watchpoints ({@link dev.kpemu.machine.Watchpoints}) cost on a
 * booted kernel (Debian's default kernel and kpemu's initramfs, the whole boot to power-off), each
 * row against a boot without watchpoints in the same round, the rows' order rotated each round:
 *
 * <ul>
 * <li>16 write watchpoints of 8 bytes on 16 pages of the kernel's read-only data (every 64 KiB after
 *     {@code linux_banner}): data the boot does not write once it is read-only, so the row is the
 *     cost of read-only pages in the engine (their hits, if any, are shown);</li>
 * <li>a write watchpoint on {@code jiffies} (x86-64: arm64's kallsyms has no data symbols): the
 *     tick's store, and every other store to that page, trapped; µs per hit = (row − baseline) / hits;</li>
 * <li>a read watchpoint on the same read-only word as the first write one: the engine's slow path
 *     for every load and store while any read watch exists.</li>
 * </ul>
 * Watchpoints are added at {@code start_kernel} (a host breakpoint), where the kernel's page
 * tables translate the addresses. Times are CPU time of the emulation thread from the first guest
 * instruction to power-off; the ratio is the median over rounds of (row / that round's baseline).
 */
final class WatchBench {
    /** One row's boots: label, guest instructions, least CPU ns, hits of its last boot, ratios per round. */
    record Row(String label, long instructions, long cpuNanos, long hits, List<Double> ratios) {
        double ratio() {
            List<Double> v = ratios.stream().sorted().toList();
            if (v.isEmpty()) return 1.0;
            int n = v.size();
            return n % 2 == 1 ? v.get(n / 2) : (v.get(n / 2 - 1) + v.get(n / 2)) / 2;
        }
    }

    /** {@code perHitNanos}: the bare-metal cost of one reported store ({@link #perHit}). */
    record Result(Arch arch, List<Row> rows, double perHitNanos) {}

    /** What a row watches, given the kernel's symbols; null: the row does not apply to this kernel. */
    private interface Watches {
        List<long[]> ranges(SymbolTable symbols);   // {va, length, reads?1:0}
    }

    private WatchBench() {}

    static final int UNTOUCHED = 16;

    static Result run(Arch arch, int repeat, PrintStream progress) throws KernelImageException {
        List<String> labels = List.of("no watchpoints", UNTOUCHED + " write watchpoints on read-only data", "write watchpoint on jiffies",
                "1 read watchpoint on read-only data");
        List<Watches> what = List.of(
                s -> List.of(),
                s -> {
                    Long base = readOnlyData(s);
                    if (base == null) return null;
                    List<long[]> r = new ArrayList<>();
                    for (int k = 1; k <= UNTOUCHED; k++) r.add(new long[] {base + k * 0x10000L, 8, 0});
                    return r;
                },
                s -> s.byName("jiffies").map(j -> List.<long[]>of(new long[] {j.address(), 8, 0})).orElse(null),
                s -> {
                    Long base = readOnlyData(s);
                    return base == null ? null : List.<long[]>of(new long[] {base + 0x10000L, 8, 1});
                });
        long[] best = new long[labels.size()], insns = new long[labels.size()], hits = new long[labels.size()];
        boolean[] applies = new boolean[labels.size()];
        List<List<Double>> ratios = new ArrayList<>();
        for (int i = 0; i < labels.size(); i++) ratios.add(new ArrayList<>());
        for (int rep = 0; rep < repeat; rep++) {
            long[] round = new long[labels.size()];
            for (int k = 0; k < labels.size(); k++) {
                int i = (k + rep) % labels.size();
                progress.printf("%s: %s (round %d of %d)%n", arch.linuxName(), labels.get(i), rep + 1, repeat);
                long[] out = boot(arch, what.get(i));
                if (out == null) continue;
                applies[i] = true;
                round[i] = out[0];
                insns[i] = out[1];
                hits[i] = out[2];
                if (best[i] == 0 || out[0] < best[i]) best[i] = out[0];
            }
            for (int i = 1; i < labels.size(); i++) if (applies[i]) ratios.get(i).add((double) round[i] / round[0]);
        }
        List<Row> rows = new ArrayList<>();
        for (int i = 0; i < labels.size(); i++)
            if (applies[i]) rows.add(new Row(labels.get(i), insns[i], best[i], hits[i], ratios.get(i)));
        return new Result(arch, rows, perHit(arch, repeat));
    }

    /** Stores of the bare-metal loop ({@link #perHit}). */
    static final int STORES = 1_000_000;

    /**
     * The cost of one reported store, on a bare-metal guest (kpemu's {@code Machine}, no kernel): a
     * loop of {@link #STORES} 8-byte stores to one word, run with a write watch on that word (each
     * store trapped, performed by the hook and handed to an empty handler) and without; (CPU time
     * with − without) / stores, the least of {@code repeat} pairs. The loop is hand-encoded (no
     * assembler outside the tests).
     */
    static double perHit(Arch arch, int repeat) {
        double best = Double.MAX_VALUE;
        for (int i = 0; i < repeat; i++) {
            long plain = storeLoop(arch, false), watched = storeLoop(arch, true);
            best = Math.min(best, (double) (watched - plain) / STORES);
        }
        return best;
    }

    private static long storeLoop(Arch arch, boolean watch) {
        var threads = java.lang.management.ManagementFactory.getThreadMXBean();
        Machine m;
        long code, data;
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(64).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        if (arch == Arch.X86_64) {
            var x = dev.kpemu.machine.x86.X86Machine.create(16 << 20);
            dev.kpemu.machine.x86.X86LongMode.identityMap(x.memory(), 0x1000, 16 << 20);
            int limit = dev.kpemu.machine.x86.X86LongMode.writeGdt(x.memory(), 0x5000);
            dev.kpemu.machine.x86.X86LongMode.enter(x.engine(), 0x5000, limit, 0x1000);
            m = x;
            code = 0x100000;
            data = 0x300000;
            b.put(new byte[] {0x48, (byte) 0xc7, (byte) 0xc1}).putInt(STORES);       // mov $STORES, %rcx
            b.put(new byte[] {0x49, (byte) 0xb9}).putLong(data);                       // movabs $data, %r9
            b.put(new byte[] {0x49, (byte) 0x89, 0x09, (byte) 0xe2, (byte) 0xfb});     // 1: mov %rcx, (%r9); loop 1b
            b.put((byte) 0xf4);                                                        // hlt
        } else {
            m = dev.kpemu.machine.arm64.Arm64Machine.create(16L << 20);
            code = dev.kpemu.machine.arm64.Arm64Layout.RAM_BASE;
            data = code + 0x200000;
            movImm(b, 11, STORES);
            movImm(b, 9, data);
            b.putInt(0xf900012b).putInt(0xf100056b).putInt(0x54ffffc1);             // 1: str x11, [x9]; subs x11, x11, #1; b.ne 1b
            b.putInt(0xd2800100).putInt(0xf2b08000).putInt(0xd4000002);             // PSCI SYSTEM_OFF: x0 = 0x84000008; hvc #0
        }
        try (m) {
            m.memory().write(code, java.util.Arrays.copyOf(b.array(), b.position()));
            m.setPc(code);
            long[] hits = {0};
            if (watch) m.watchpoints().add(data, 8, false, true, h -> hits[0]++);
            long c0 = threads.getCurrentThreadCpuTime();
            m.run(50L * STORES);
            long cpu = threads.getCurrentThreadCpuTime() - c0;
            if (m.memory().readLong(data) != 1 || watch && hits[0] != STORES)
                throw new IllegalStateException(arch.linuxName() + ": the store loop did not run as written (" + hits[0] + " hits)");
            return cpu;
        }
    }

    /** arm64 {@code movz}/{@code movk} of a 64-bit value into x{@code reg}. */
    private static void movImm(java.nio.ByteBuffer b, int reg, long v) {
        b.putInt(0xd2800000 | (int) (v & 0xffff) << 5 | reg);
        for (int hw = 1; hw < 4; hw++) b.putInt(0xf2800000 | hw << 21 | (int) ((v >>> (16 * hw)) & 0xffff) << 5 | reg);
    }

    /**
     * Where the read-only data the rows watch starts: {@code linux_banner} (in {@code .rodata}), or
     * null when the kernel's symbols have no data symbols (Debian's arm64 kallsyms).
     */
    private static Long readOnlyData(SymbolTable s) {
        return s.byName("linux_banner").map(b -> b.address()).orElse(null);
    }

    /** One boot: {cpu ns, instructions, hits}, or null when the row does not apply to the kernel. */
    private static long[] boot(Arch arch, Watches what) throws KernelImageException {
        var threads = java.lang.management.ManagementFactory.getThreadMXBean();
        long[] hits = {0}, cpu = {0, 0};
        boolean[] missing = {false};
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) {
                List<long[]> ranges = what.ranges(guest.symbols());
                if (ranges == null) {
                    missing[0] = true;
                    return;
                }
                Machine m = guest.machine();
                if (!ranges.isEmpty()) m.addBreakpoint(guest.symbols().address("start_kernel"), (machine, at) -> {
                    for (long[] r : ranges) {
                        long pa = machine.translateOrThrow(r[0]).physical();
                        machine.watchpoints().add(pa, r[1], r[2] == 1, r[2] == 0, h -> hits[0]++);
                    }
                    return true;
                });
                cpu[0] = threads.getCurrentThreadCpuTime();
            }

            @Override public void finished(LinuxGuest guest) { cpu[1] = threads.getCurrentThreadCpuTime(); }
        };
        PrintStream none = new PrintStream(OutputStream.nullOutputStream());
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, OutputStream.nullOutputStream(), none), hooks);
        if (missing[0]) return null;
        if (r.outcome() != dev.kpemu.boot.BootOutcome.POWERED_OFF) throw new IllegalStateException(arch.linuxName() + ": the boot ended " + r.status());
        return new long[] {cpu[1] - cpu[0], r.instructions(), hits[0]};
    }
}
