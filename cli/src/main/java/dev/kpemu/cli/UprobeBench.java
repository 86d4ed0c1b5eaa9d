package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.ElfImage;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.InitramfsFiles;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu bench uprobes}: what uprobes cost on a booted kernel (Debian's default kernel, a
 * command guest running a shell loop of {@link #LOOPS} iterations, each calling busybox's
 * {@code test_main} through ash's {@code [} builtin), each row against a boot without uprobes in
 * the same round, the rows' order rotated each round:
 * <ul>
 * <li>{@link #UNHIT} {@code p} uprobes on busybox functions the guest never runs: call targets in
 *     busybox's {@code .text} (x86-64 {@code call rel32} targets called from two places or more,
 *     arm64 {@code bl} targets) and applets' main functions ({@code applet_main[]}, found as
 *     guest-images/busybox-offsets.sh finds it), less the applets the guest runs, less every one a
 *     calibration boot with up to {@link #CALIBRATION} of them probed saw hit (the runs are
 *     deterministic: the bench fails if the row then counts an event): the unhit rule (ratio ~1,
 *     the same instruction count);</li>
 * <li>one {@code p} uprobe with three fetch arguments (argc, argv, {@code +0(+8(argv)):string}) on
 *     {@code test_main}: the per-event cost, (row - baseline) / events.</li>
 * </ul>
 * CPU time of the emulation thread from the first guest instruction to power-off, the set-up at
 * the registration point (BTF read, definitions placed) excluded.
 */
final class UprobeBench {
    /** Unhit uprobes (issue 27's 1,000); each distinct address takes one of the native list's host breakpoints. */
    static final int UNHIT = 1000;
    /** Candidates probed in the calibration boot, which finds the ones the guest runs. */
    static final int CALIBRATION = 3000;
    static final int LOOPS = 20_000;

    record Row(String label, int probes, long instructions, long cpuNanos, long events, List<Double> ratios) {
        double ratio() {
            List<Double> v = ratios.stream().sorted().toList();
            int n = v.size();
            return n == 0 ? 1 : n % 2 == 1 ? v.get(n / 2) : (v.get(n / 2 - 1) + v.get(n / 2)) / 2;
        }

        /** Per-round spread of the ratio: min..max. */
        String spread() {
            if (ratios.isEmpty()) return "-";
            return String.format("%.3f..%.3f", ratios.stream().mapToDouble(d -> d).min().orElse(0), ratios.stream().mapToDouble(d -> d).max().orElse(0));
        }
    }

    record Result(Arch arch, List<Row> rows, List<Double> perEventMicros) {}

    private UprobeBench() {}

    static Result run(Arch arch, int repeat, PrintStream progress) throws KernelImageException, IOException {
        byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(arch));
        Map<String, Long> mains = appletMains(busybox);
        List<String> used = List.of("sh", "ash", "test", "[", "[[", "mount", "poweroff", "halt", "reboot", "echo", "cat", "true", "false",
                "sleep", "stty", "setsid", "cttyhack", "mkdir", "mknod", "printf", "init", "linuxrc", "busybox");
        java.util.Set<Long> runs = new java.util.HashSet<>();
        for (String u : used) if (mains.containsKey(u)) runs.add(mains.get(u));
        java.util.TreeSet<Long> candidates = new java.util.TreeSet<>(callTargets(busybox, arch));
        candidates.addAll(mains.values());
        candidates.removeAll(runs);
        List<Long> probed = new ArrayList<>(candidates);
        if (probed.size() > CALIBRATION) {   // spread over the text, not its first part only
            List<Long> spread = new ArrayList<>();
            for (int i = 0; i < CALIBRATION; i++) spread.add(probed.get((int) ((long) i * probed.size() / CALIBRATION)));
            probed = spread;
        }
        List<String> calibration = new ArrayList<>();
        for (int i = 0; i < probed.size(); i++) calibration.add("p:cal/c" + i + " /bin/busybox:0x" + Long.toHexString(probed.get(i)));
        String regs = arch == Arch.X86_64 ? "argc=%di:s32 argv=%si:x64 arg1=+0(+8(%si)):string" : "argc=%x0:s32 argv=%x1:x64 arg1=+0(+8(%x1)):string";
        List<String> hot = List.of("p:bench/test_main /bin/busybox:0x" + Long.toHexString(mains.get("test")) + " " + regs);

        byte[] initrd = CommandGuest.initramfs(busybox, arch,
                List.of("sh", "-c", "i=0; while [ $i -lt " + LOOPS + " ]; do i=$((i+1)); done"), false).toBytes();
        Path file = Files.createTempFile("kpemu-bench-uprobes-", ".cpio");
        try {
            Files.write(file, initrd);
            InitramfsFiles files = InitramfsFiles.read(initrd);
            progress.printf("%s: calibration: %d candidate functions probed, to leave out the ones the guest runs%n", arch.linuxName(), calibration.size());
            java.util.Set<String> hit = new java.util.HashSet<>();
            boot(arch, file, files, calibration, r -> hit.add(r.event()));
            List<String> unhit = new ArrayList<>();
            for (int i = 0; i < probed.size() && unhit.size() < UNHIT; i++) {
                if (hit.contains("c" + i)) continue;
                unhit.add("p:bench/u" + unhit.size() + " /bin/busybox:0x" + Long.toHexString(probed.get(i)));
            }
            if (unhit.size() < UNHIT) throw new IllegalStateException(arch.linuxName() + ": only " + unhit.size() + " of " + probed.size() + " candidate functions were not hit");
            List<String> labels = List.of("no uprobes", UNHIT + " uprobes never hit", "1 uprobe, 3 fetchargs, on test_main");
            List<List<String>> defs = List.of(List.of(), unhit, hot);
            long[] best = new long[labels.size()], insns = new long[labels.size()], events = new long[labels.size()];
            List<List<Double>> ratios = new ArrayList<>();
            List<Double> perEvent = new ArrayList<>();
            for (int i = 0; i < labels.size(); i++) ratios.add(new ArrayList<>());
            for (int rep = 0; rep < repeat; rep++) {
                long[] round = new long[labels.size()], roundEvents = new long[labels.size()];
                for (int k = 0; k < labels.size(); k++) {
                    int i = (k + rep) % labels.size();
                    progress.printf("%s: %s (round %d of %d)%n", arch.linuxName(), labels.get(i), rep + 1, repeat);
                    long[] out = boot(arch, file, files, defs.get(i), r -> { });
                    if (i == 1 && out[2] != 0) throw new IllegalStateException(arch.linuxName() + ": " + out[2] + " events of uprobes the calibration boot never saw hit");
                    round[i] = out[0];
                    insns[i] = out[1];
                    events[i] = roundEvents[i] = out[2];
                    if (best[i] == 0 || out[0] < best[i]) best[i] = out[0];
                }
                for (int i = 1; i < labels.size(); i++) ratios.get(i).add((double) round[i] / round[0]);
                perEvent.add((round[2] - round[0]) / 1e3 / Math.max(1, roundEvents[2]));
            }
            List<Row> rows = new ArrayList<>();
            for (int i = 0; i < labels.size(); i++) rows.add(new Row(labels.get(i), defs.get(i).size(), insns[i], best[i], events[i], ratios.get(i)));
            return new Result(arch, rows, perEvent);
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** One boot: {cpu ns without the registration, instructions, uprobe events}. */
    private static long[] boot(Arch arch, Path initrd, InitramfsFiles files, List<String> defs,
            java.util.function.Consumer<dev.kpemu.kprobes.events.TraceRecord> seen) throws KernelImageException {
        var threads = java.lang.management.ManagementFactory.getThreadMXBean();
        long[] cpu = {0, 0, 0}, events = {0};
        TracedBoot traced = new TracedBoot(defs, null).keepRecords(false).guestFiles(files);
        traced.addSink(r -> {
            events[0]++;
            seen.accept(r);
        });
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) {
                traced.ready(guest);
                cpu[0] = threads.getCurrentThreadCpuTime();
            }

            @Override public boolean breakpoint(LinuxGuest guest, long address) {
                long c = threads.getCurrentThreadCpuTime();
                try {
                    return traced.breakpoint(guest, address);
                } finally {
                    cpu[2] += threads.getCurrentThreadCpuTime() - c;
                }
            }

            @Override public void finished(LinuxGuest guest) {
                cpu[1] = threads.getCurrentThreadCpuTime();
                traced.finished(guest);
            }
        };
        PrintStream none = new PrintStream(OutputStream.nullOutputStream());
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, initrd, CommandGuest.commandLine(arch, null), 256, 120,
                OutputStream.nullOutputStream(), none, new dev.kpemu.boot.GuestTerminal(OutputStream.nullOutputStream(), null), null, false, 1,
                dev.kpemu.machine.Schedule.DEFAULT_SEED), hooks);
        if (r.outcome() != dev.kpemu.boot.BootOutcome.POWERED_OFF || r.commandExit() == null || r.commandExit() != 0)
            throw new IllegalStateException(arch.linuxName() + ": the boot ended " + r.status() + " (command exit " + r.commandExit() + ")");
        return new long[] {cpu[1] - cpu[0] - cpu[2], r.instructions(), events[0]};
    }

    /**
     * Busybox's applets' main functions as file offsets, by applet name: the names are the
     * NUL-separated list that starts {@code "[", "[["}; {@code applet_main[]} is the one run of that
     * many {@code .text} addresses in {@code .data.rel.ro} (guest-images/busybox-offsets.sh).
     */
    static Map<String, Long> appletMains(byte[] busybox) throws KernelImageException {
        ElfImage elf = ElfImage.parse(busybox, "busybox");
        byte[] marker = {'[', 0, '[', '[', 0};
        int at = indexOf(busybox, marker);
        if (at < 0) throw new IllegalStateException("busybox: no applet name list");
        List<String> names = new ArrayList<>();
        for (int p = at; busybox[p] != 0; ) {
            int e = p;
            while (busybox[e] != 0) e++;
            names.add(new String(busybox, p, e - p, StandardCharsets.ISO_8859_1));
            p = e + 1;
        }
        var text = elf.section(".text").orElseThrow();
        var data = elf.section(".data.rel.ro").orElseThrow();
        ByteBuffer b = ByteBuffer.wrap(busybox, (int) data.offset(), (int) data.size()).slice().order(ByteOrder.LITTLE_ENDIAN);
        int words = (int) (data.size() / 8), run = 0, start = 0, table = -1, found = 0;
        for (int i = 0; i <= words; i++) {
            long v = i < words ? b.getLong(i * 8) : 0;
            if (Long.compareUnsigned(v - text.addr(), text.size()) < 0) {
                if (run++ == 0) start = i;
            } else {
                if (run == names.size()) { table = start; found++; }
                run = 0;
            }
        }
        if (found != 1) throw new IllegalStateException("busybox: no single applet_main table of " + names.size() + " entries");
        Map<String, Long> mains = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) {
            long va = b.getLong((table + i) * 8);
            for (ElfImage.Segment s : elf.loadSegments())
                if (s.containsVaddr(va)) mains.put(names.get(i), va - s.vaddr() + s.offset());
        }
        return mains;
    }

    /**
     * File offsets of call targets in busybox's {@code .text}: x86-64 {@code e8 rel32} targets inside
     * {@code .text} seen from two call sites or more (a byte 0xe8 inside another instruction rarely
     * names the same target twice), arm64 {@code bl} targets (fixed-width instructions: exact).
     */
    static List<Long> callTargets(byte[] busybox, Arch arch) throws KernelImageException {
        ElfImage elf = ElfImage.parse(busybox, "busybox");
        var text = elf.section(".text").orElseThrow();
        ByteBuffer b = ByteBuffer.wrap(busybox).order(ByteOrder.LITTLE_ENDIAN);
        Map<Long, Integer> calls = new java.util.HashMap<>();
        long start = text.offset(), end = text.offset() + text.size();
        if (arch == Arch.X86_64) {
            for (long o = start; o + 5 <= end; o++) {
                if ((busybox[(int) o] & 0xff) != 0xe8) continue;
                long target = o + 5 + b.getInt((int) o + 1);
                if (target >= start && target < end) calls.merge(target, 1, Integer::sum);
            }
        } else {
            for (long o = start; o + 4 <= end; o += 4) {
                int insn = b.getInt((int) o);
                if ((insn >>> 26) != 0b100101) continue;
                long target = o + ((long) (insn << 6) >> 6) * 4;
                if (target >= start && target < end) calls.merge(target, 2, Integer::sum);
            }
        }
        long delta = text.addr() - text.offset();   // file offset == address - delta inside .text
        List<Long> out = new ArrayList<>();
        for (var e : calls.entrySet()) {
            if (e.getValue() < 2) continue;
            long va = e.getKey() + delta;
            for (ElfImage.Segment s : elf.loadSegments())
                if (s.executable() && s.containsVaddr(va)) out.add(va - s.vaddr() + s.offset());
        }
        out.sort(null);
        return out;
    }

    private static int indexOf(byte[] h, byte[] n) {
        outer:
        for (int i = 0; i + n.length <= h.length; i++) {
            for (int j = 0; j < n.length; j++) if (h[i + j] != n[j]) continue outer;
            return i;
        }
        return -1;
    }
}
