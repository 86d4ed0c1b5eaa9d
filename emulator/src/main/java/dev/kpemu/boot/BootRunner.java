package dev.kpemu.boot;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongSupplier;

import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.Symbol;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.snapshot.MachineSnapshot;
import dev.kpemu.machine.snapshot.SnapshotException;

/**
 * Boots a Linux kernel on kpemu, either architecture, and tells how it ended
 * ({@link BootOutcome}): the guest powered off, a guest panic or unhandled fault (with the
 * kernel's last lines and the PC/symbol), the guest-time limit passed, or the host stopped it. The timeout is in guest seconds (virtual
 * time, so a given run always stops at the same point). Each arch prepares its guest
 * ({@link X86LinuxGuest}, {@link Arm64LinuxGuest}); the run loop here is shared.
 */
public final class BootRunner {
    /** Console lines kept for the failure report. */
    public static final int KEEP_LINES = 40;
    /** The line that ends a panic's oops. */
    public static final String PANIC_END = "---[ end Kernel panic";
    /** After a panic starts, how long to let the kernel finish printing it. */
    static final long PANIC_GRACE_INSTRUCTIONS = 200_000_000L;
    /** Instructions per run-loop call: the granularity of timeout and panic checks. */
    static final long CHUNK = 20_000_000L;

    /**
     * What to boot and how. {@code timeoutSeconds}: the guest-time limit, held also while the guest
     * idles ({@link Double#POSITIVE_INFINITY}: none). {@code terminal} (may be null): the command
     * terminal UART and its host side ({@link GuestTerminal}). {@code hostStop} (may be null): lets
     * another thread stop the boot at the next safe point.
     */
    public record Options(Arch arch, Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                          OutputStream console, PrintStream trace, GuestTerminal terminal, HostStop hostStop, boolean x86Apic,
                          int cpus, long schedSeed) {
        /** The most virtual CPUs {@code --cpus} takes (the GICv2's limit; the x86 board follows it). */
        public static final int MAX_CPUS = 8;
        /** The least guest RAM {@code --memory} takes, in MiB. */
        public static final int MIN_MEMORY_MIB = 64;
        /**
         * The most guest RAM {@code --memory} takes, in MiB (128 GiB): the largest booted on both
         * boards (Debian 6.1, x86-64 and arm64, to power-off). Guest RAM is reserved, not
         * committed, but the kernel touches about 1/50 of it at boot (its struct page array): 128
         * GiB cost 2.6 GiB of host memory.
         */
        public static final int MAX_MEMORY_MIB = 128 * 1024;

        /** A one-line reason why {@code memoryMiB} cannot be given, or null when it can. */
        public static String memoryProblem(int memoryMiB) {
            if (memoryMiB < MIN_MEMORY_MIB) return "--memory must be at least " + MIN_MEMORY_MIB + " MiB";
            if (memoryMiB > MAX_MEMORY_MIB) return "--memory " + memoryMiB + " MiB is more than kpemu's boards give; the largest is " + MAX_MEMORY_MIB + " MiB";
            return null;
        }

        /**
         * The most guest RAM of the x86-64 APIC board ({@code --cpus} above 1, {@code --x86-apic}), in MiB:
         * its RAM is one region from 0 and ends where the I/O APIC's registers begin (0xfec00000);
         * QEMU moves RAM above that to 4 GiB, kpemu's board does not yet.
         */
        public static final int MAX_X86_APIC_MEMORY_MIB = (int) (dev.kpemu.machine.x86.devices.IoApic.DEFAULT_BASE >> 20);

        /** As {@link #memoryProblem(int)} for the machine {@code arch} with (x86-64) or without the APIC board. */
        public static String memoryProblem(Arch arch, int memoryMiB, boolean x86ApicBoard) {
            String p = memoryProblem(memoryMiB);
            if (p == null && arch == Arch.X86_64 && x86ApicBoard && memoryMiB > MAX_X86_APIC_MEMORY_MIB) {
                p = "--memory " + memoryMiB + " MiB is more than the x86-64 board with several CPUs (or --x86-apic) gives; the largest is "
                        + MAX_X86_APIC_MEMORY_MIB + " MiB (its RAM ends at the I/O APIC, 0xfec00000)";
            }
            return p;
        }

        public Options {
            String memory = memoryProblem(arch, memoryMiB, x86Apic || cpus > 1);
            if (memory != null) throw new IllegalArgumentException(memory);
            if (!(timeoutSeconds > 0)) throw new IllegalArgumentException("--timeout must be positive");
            if (x86Apic && arch != Arch.X86_64) throw new IllegalArgumentException("--x86-apic is an x86-64 machine option");
            if (cpus < 1 || cpus > MAX_CPUS) throw new IllegalArgumentException("--cpus must be 1 to " + MAX_CPUS + ", not " + cpus);
        }

        /** One CPU on the default schedule. */
        public Options(Arch arch, Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                       OutputStream console, PrintStream trace, GuestTerminal terminal, HostStop hostStop, boolean x86Apic) {
            this(arch, kernel, initrd, append, memoryMiB, timeoutSeconds, console, trace, terminal, hostStop, x86Apic,
                    1, dev.kpemu.machine.Schedule.DEFAULT_SEED);
        }

        /** Without {@code x86Apic}: the x86-64 PC keeps only the 8259 pair (the default machine). */
        public Options(Arch arch, Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                       OutputStream console, PrintStream trace, GuestTerminal terminal, HostStop hostStop) {
            this(arch, kernel, initrd, append, memoryMiB, timeoutSeconds, console, trace, terminal, hostStop, false);
        }

        /**
         * These options on the x86-64 PC with a local APIC and an I/O APIC ({@code X86Pc.Interrupts.APIC},
         * the reference machine's controllers) when {@code on}.
         */
        public Options withX86Apic(boolean on) {
            return new Options(arch, kernel, initrd, append, memoryMiB, timeoutSeconds, console, trace, terminal, hostStop, on,
                    cpus, schedSeed);
        }

        /**
         * These options with {@code cpus} virtual CPUs run in turn on the schedule {@code schedSeed} names
         * ({@link dev.kpemu.machine.Schedule}: {@code DEFAULT_SEED} is the round-robin of fixed quanta).
         * x86-64: more than one CPU implies the APIC board ({@code X86Pc.Interrupts.APIC}: only local
         * APICs start APs, and QEMU's {@code pc -smp N} has them), whatever {@link #withX86Apic} says;
         * one CPU is the machine it always was. arm64 does not read them yet (one PE).
         */
        public Options withCpus(int cpus, long schedSeed) {
            return new Options(arch, kernel, initrd, append, memoryMiB, timeoutSeconds, console, trace, terminal, hostStop, x86Apic,
                    cpus, schedSeed);
        }

        public Options(Arch arch, Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                       OutputStream console, PrintStream trace) {
            this(arch, kernel, initrd, append, memoryMiB, timeoutSeconds, console, trace, null, null);
        }

        public static Options defaults(Arch arch) {
            return new Options(arch, null, null, null, 256, 60, System.err, System.out);
        }
    }

    /**
     * {@code commandExit}: the exit status the guest's command reported ({@link CommandGuest}), or null.
     * {@code snapshot}: what this boot did with a snapshot ({@link SnapshotUse}), or null without one.
     */
    public record Result(BootOutcome outcome, String status, StopReason stop, long guestNanos, long instructions,
                         long hostNanos, long initDoneGuestNanos, long initDoneHostNanos, long interrupts,
                         List<String> lastLines, long pc, java.util.function.Supplier<String> pcSymbol, String stats, Integer commandExit,
                         SnapshotUse snapshot) {
        /**
         * The kernel symbol at {@link #pc}, as {@code symbol+0xoff/0xsize}: looked up when first
         * asked, since a boot that powered off prints none and x86's symbols are otherwise not
         * read at all by a boot without probes (reading them took its end some 60 ms of CPU).
         */
        public String symbol() { return pcSymbol.get(); }
    }

    /** A boot's use of a snapshot: restored from {@code file} or saved to it (null when saving failed). */
    public record SnapshotUse(boolean restored, Path file, long ramPages, long bytes) {}

    private BootRunner() {}

    public static Result boot(Options o) throws KernelImageException {
        return boot(o, BootHooks.NONE);
    }

    /** Boots, calling {@code hooks} before the first instruction and at host breakpoints. */
    public static Result boot(Options o, BootHooks hooks) throws KernelImageException {
        try {
            return boot(o, hooks, null);
        } catch (SnapshotException e) {
            throw new IllegalStateException(e);       // not without a snapshot
        }
    }

    /**
     * Boots with a snapshot ({@link BootSnapshot}; null: none): when its file exists the machine
     * starts from it, at {@link BootSnapshot#AT}, and {@code hooks} see that stop as the cold boot's
     * host breakpoint there; otherwise the boot is cold and saves the snapshot when it gets there.
     * A snapshot that cannot be restored throws, unless the snapshot is automatic: then a notice
     * and a cold boot. With {@code cpus() > 1} the snapshot holds every vCPU and the schedule's
     * position ({@link MachineSnapshot}); the identity names the CPU count and seed, so a file of
     * another count or seed is refused in one line.
     */
    public static Result boot(Options o, BootHooks hooks, BootSnapshot snapshot) throws KernelImageException, SnapshotException {
        return boot(o, hooks, snapshot, true);
    }

    /**
     * Boots from {@code from}, a snapshot kept in memory ({@link MemorySnapshot}) of this boot (the
     * same options, kernel and initramfs): the hooks see the stop it was taken at first.
     */
    public static Result bootFrom(Options o, BootHooks hooks, MemorySnapshot from) throws KernelImageException, SnapshotException {
        return boot(o, hooks, null, false, java.util.Objects.requireNonNull(from));
    }

    private static Result boot(Options o, BootHooks hooks, BootSnapshot snapshot, boolean mayRestore)
            throws KernelImageException, SnapshotException {
        return boot(o, hooks, snapshot, mayRestore, null);
    }

    private static Result boot(Options o, BootHooks hooks, BootSnapshot snapshot, boolean mayRestore, MemorySnapshot from)
            throws KernelImageException, SnapshotException {
        Path kernel = o.kernel(), initrd = o.initrd();
        if (kernel == null || initrd == null) {
            GuestImages g = GuestImages.forRepository();
            if (kernel == null) kernel = g.kernel(o.arch());
            if (initrd == null) initrd = g.initramfs(o.arch());
        }
        long hostStart = System.nanoTime();
        PhaseLog.mark("boot() entered");
        byte[] initrdBytes = read(initrd, "initrd");
        Map<String, String> identity = null;
        Path snapshotFile = null;
        if (snapshot != null) {
            try {
                identity = snapshot.identityOf(o, kernel, initrd);
            } catch (IOException e) {
                throw new KernelImageException("cannot read " + kernel + ": " + e.getMessage(), e);
            }
            snapshotFile = snapshot.fileFor(identity);
            PhaseLog.mark("snapshot identity (digests)");
        }
        boolean restoring = snapshot != null && mayRestore && Files.exists(snapshotFile);
        if (snapshot != null && !snapshot.automatic() && !restoring && Files.isDirectory(snapshotFile)) {
            throw new SnapshotException(SnapshotException.Kind.IO,
                    "snapshot " + snapshotFile + " is a directory");
        }
        SnapshotUse used = null;
        try (LinuxGuest guest = o.arch() == Arch.X86_64
                ? X86LinuxGuest.prepare(o, kernel, initrdBytes, restoring || from != null)
                : Arm64LinuxGuest.prepare(o, kernel, initrdBytes, restoring || from != null)) {
            Machine m = guest.machine();
            PhaseLog.mark("guest prepared (kernel file, loader, machine)");
            m.setSliceInstructions(Long.getLong("kpemu.slice", Machine.DEFAULT_SLICE));
            if (o.trace() != null) {
                o.trace().printf("kpemu: guest starts %.2f s after boot()%n", (System.nanoTime() - hostStart) / 1e9);
                o.trace().printf("kpemu: %s%n", guest.describe());
            }
            if (restoring) {
                long restoreStart = System.nanoTime();
                try {
                    MachineSnapshot.restore(m, identity, snapshotFile);
                } catch (SnapshotException e) {
                    if (!snapshot.automatic()) throw e;
                    snapshot.notices().accept("kpemu: " + e.getMessage() + "; booting cold");
                    guest.close();
                    return boot(o, hooks, snapshot, false);
                }
                used = new SnapshotUse(true, snapshotFile, -1, sizeOf(snapshotFile));
                PhaseLog.mark("snapshot restored");
                snapshot.notices().accept(String.format("kpemu: started from snapshot %s (guest %.3f s, %d instructions; restored in %.2f s)",
                        snapshotFile, m.clock().nanos() / 1e9, m.clock().instructions(), (System.nanoTime() - restoreStart) / 1e9));
            }
            if (from != null) {
                from.restoreInto(m);
                used = new SnapshotUse(true, null, -1, from.bytes());
                PhaseLog.mark("snapshot restored (in memory)");
            }
            hooks.ready(guest);
            PhaseLog.mark("hooks ready (definitions checked)");
            SwitchLog switchLog = SwitchLog.attachIfRequested(m);
            // The snapshot point: a host breakpoint the cold boot saves at; a restored machine
            // is stopped there already (the stop is handed to the hooks as the cold boot's).
            long snapshotAt = -1;
            boolean hooksOwnSnapshotAt = false;
            StopReason first = null;
            var point = snapshot == null || !snapshot.atInit() ? Optional.<Symbol>empty() : guest.symbols().byName(BootSnapshot.AT);
            // a snapshot at a guest time: a clock event stops the run there, the loop saves (below)
            long saveAtNanos = snapshot != null && !snapshot.atInit() && !restoring ? snapshot.atGuestNanos() : -1;
            if (snapshot != null && snapshot.atInit() && point.isEmpty()) {
                String why = "no snapshot: the kernel has no " + BootSnapshot.AT + " symbol";
                if (!snapshot.automatic() || restoring) {
                    throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE, why);
                }
                snapshot.notices().accept("kpemu: " + why + "; booting without one");
            }
            if (((restoring && !snapshot.atInit()) || from != null) && m.stoppedAtBreakpoint() != -1) {
                first = new StopReason.Breakpoint(m.stoppedAtBreakpoint(), m.cpu());   // saved at a host breakpoint's stop
            }
            if (point.isPresent()) {
                snapshotAt = point.get().address();
                hooksOwnSnapshotAt = m.hasBreakpoint(snapshotAt);
                if (restoring) {
                    if (m.stoppedAtBreakpoint() != snapshotAt || m.pc() != snapshotAt) {
                        throw new SnapshotException(SnapshotException.Kind.CORRUPT,
                                "snapshot " + snapshotFile + " was not taken at " + BootSnapshot.AT);
                    }
                    first = new StopReason.Breakpoint(snapshotAt, m.cpu());
                } else if (!hooksOwnSnapshotAt) {
                    m.addBreakpoint(snapshotAt);
                }
            }
            ConsoleMonitor con = guest.console();
            long limitNanos = Double.isInfinite(o.timeoutSeconds()) ? Long.MAX_VALUE : (long) (o.timeoutSeconds() * 1e9);
            // The limit is an event on the guest clock: idling (HLT/WFI) jumps no further than it,
            // and a running slice ends at it, so the guest stops at the limit whatever it does.
            if (limitNanos != Long.MAX_VALUE) m.clock().schedule(limitNanos, now -> m.requestStopAtSliceEnd(new StopReason.GuestTimeLimit(now)));
            // the snapshot's guest time ends the run there (an idle guest may jump past it otherwise)
            if (saveAtNanos >= 0) m.clock().schedule(saveAtNanos, now -> m.requestStopAtSliceEnd(new StopReason.BudgetExhausted()));
            if (o.terminal() != null && o.terminal().input() != null) TerminalFeed.start(m, guest.terminal(), o.terminal());
            if (o.hostStop() != null) o.hostStop().attach(m);
            StopReason stop;
            BootOutcome outcome;
            String status;
            long panicAt = -1;
            while (true) {
                stop = first != null ? first : m.run(CHUNK);
                first = null;
                // before the hooks see a breakpoint stop: a restored machine hands them the same stop
                if (saveAtNanos >= 0 && m.clock().nanos() >= saveAtNanos
                        && (stop instanceof StopReason.BudgetExhausted || stop instanceof StopReason.Breakpoint)) {
                    saveAtNanos = -1;
                    used = save(m, identity, snapshot, snapshotFile);
                }
                if (snapshotAt != -1 && stop instanceof StopReason.Breakpoint b && b.address() == snapshotAt) {
                    if (!restoring) used = save(m, identity, snapshot, snapshotFile);
                    long at = snapshotAt;
                    snapshotAt = -1;
                    if (hooks.breakpoint(guest, at)) continue;
                    if (!hooksOwnSnapshotAt) {
                        m.removeBreakpoint(at);
                        continue;
                    }
                }
                if (con.panicked()) {
                    if (panicAt < 0) panicAt = m.clock().instructions();
                    if (con.seen(PANIC_END) || m.clock().instructions() - panicAt >= PANIC_GRACE_INSTRUCTIONS
                            || !(stop instanceof StopReason.BudgetExhausted)) {
                        outcome = BootOutcome.GUEST_FAILED;
                        status = "guest kernel panic: " + panicLine(con.lastLines());
                        break;
                    }
                    continue;
                }
                if (stop instanceof StopReason.Breakpoint b && hooks.breakpoint(guest, b.address())) continue;
                if (stop instanceof StopReason.GuestTimeLimit) {
                    outcome = BootOutcome.TIMEOUT;
                    status = String.format("timeout after %.3f guest seconds", m.clock().nanos() / 1e9);
                    break;
                }
                if (stop instanceof StopReason.HostRequest h) {
                    outcome = BootOutcome.STOPPED;
                    status = "stopped: " + h.why();
                    break;
                }
                if (stop instanceof StopReason.Watchpoint w) {          // a watch handler's Watchpoints.stopAt
                    outcome = BootOutcome.STOPPED;
                    status = String.format("stopped at a watchpoint: %s of %d bytes at 0x%x by 0x%x", w.hit().write() ? "write" : "read",
                            w.hit().size(), w.hit().physicalAddress(), w.hit().pc());
                    break;
                }
                if (stop instanceof StopReason.BudgetExhausted) {
                    if (m.clock().nanos() >= limitNanos) {
                        outcome = BootOutcome.TIMEOUT;
                        status = String.format("timeout after %.3f guest seconds", m.clock().nanos() / 1e9);
                        break;
                    }
                    continue;
                }
                outcome = stop instanceof StopReason.PoweredOff || stop instanceof StopReason.Reset ? BootOutcome.POWERED_OFF : BootOutcome.GUEST_FAILED;
                status = switch (stop) {
                    case StopReason.PoweredOff p -> "guest powered off";
                    case StopReason.Reset r -> "guest reset";
                    case StopReason.Halted h -> "guest halted with nothing that could wake it";
                    case StopReason.GuestError e -> "guest fault: " + e.message();
                    default -> "stopped: " + stop;
                };
                break;
            }
            PhaseLog.mark("guest stopped");
            if (switchLog != null) switchLog.write(guest.symbols());
            hooks.finished(guest);
            try {
                if (o.terminal() != null) o.terminal().output().flush();
            } catch (IOException ignored) {
                // the terminal's sink went away
            }
            try {
                con.flush();
            } catch (IOException ignored) {
                // the console sink went away
            }
            long pc = m.pc();
            long doneHost = con.seenAtHost(Initramfs.MARK_DONE);
            return new Result(outcome, status, stop, m.clock().nanos(), m.clock().instructions(), System.nanoTime() - hostStart,
                    con.seenAt(Initramfs.MARK_DONE), doneHost < 0 ? -1 : doneHost - hostStart, guest.interrupts(),
                    con.lastLines(), pc, symbolize(guest, pc), guest.stats(), CommandGuest.exitStatus(con.firstLineWith(CommandGuest.EXIT_MARKER)),
                    used);
        }
    }

    /** Saves the snapshot at its point; a failure is a notice (the boot itself goes on). */
    private static SnapshotUse save(Machine m, Map<String, String> identity, BootSnapshot snapshot, Path file) {
        try {
            var saved = MachineSnapshot.save(m, identity, file);
            snapshot.notices().accept(String.format("kpemu: saved snapshot %s (guest %.3f s, %d RAM pages, %.1f MiB)",
                    file, m.clock().nanos() / 1e9, saved.ramPages(), saved.bytes() / 1048576.0));
            if (snapshot.automatic()) snapshot.pruneOtherBuilds(identity);
            return new SnapshotUse(false, file, saved.ramPages(), saved.bytes());
        } catch (SnapshotException e) {
            snapshot.notices().accept("kpemu: " + e.getMessage());
            return new SnapshotUse(false, null, 0, 0);
        } catch (IllegalStateException e) {        // not a snapshot point: probes attached, interrupts held
            snapshot.notices().accept("kpemu: no snapshot at " + snapshot.point() + ": " + e.getMessage());
            return new SnapshotUse(false, null, 0, 0);
        }
    }

    private static long sizeOf(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            return -1;
        }
    }

    static ConsoleMonitor consoleMonitor(Options o, LongSupplier guestNanos) {
        return new ConsoleMonitor(o.console(), KEEP_LINES,
                List.of(Initramfs.MARK_START, Initramfs.MARK_DONE, "Run /init", PANIC_END, CommandGuest.EXIT_MARKER), guestNanos);
    }

    private static String panicLine(List<String> lines) {
        for (String l : lines) {
            int i = l.indexOf(ConsoleMonitor.PANIC);
            if (i >= 0) return l.substring(i);
        }
        return ConsoleMonitor.PANIC;
    }

    /** {@code pc}'s symbol in {@code guest}'s kernel, looked up once when first asked. */
    private static java.util.function.Supplier<String> symbolize(LinuxGuest guest, long pc) {
        return new java.util.function.Supplier<>() {
            private String symbol;

            @Override public synchronized String get() {
                if (symbol == null) {
                    try {
                        symbol = guest.symbols().format(pc);
                    } catch (RuntimeException e) {
                        symbol = "(no symbols: " + e.getMessage() + ")";
                    }
                }
                return symbol;
            }
        };
    }

    static byte[] read(Path p, String what) throws KernelImageException {
        try {
            return dev.kpemu.image.FileBytes.read(p);
        } catch (IOException e) {
            throw new KernelImageException("cannot read " + what + " " + p + ": " + e.getMessage(), e);
        }
    }

    /**
     * The kernel's text tables, kept between runs beside the kernel cache ({@code text-tables}),
     * keyed by the kernel file's digest and kpemu's build; read from the kernel when there is no
     * cache folder or the key cannot be had.
     */
    static dev.kpemu.image.KernelTextTables textTables(Arch arch, dev.kpemu.image.SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file, Path kernelPath) {
        return dev.kpemu.image.KernelTextTablesInMemory.read(arch, syms, file, kernelDigest(kernelPath), buildOrNull(), besideKernelCache("text-tables"));
    }

    /**
     * The kernel's symbols, kept between runs beside the kernel cache ({@code symbols}) and in this
     * JVM's memory ({@link dev.kpemu.image.KernelSymbolsInMemory}), keyed as
     * the text tables are; decoded when there is no cache folder or the key cannot be had.
     */
    static dev.kpemu.image.SymbolTable symbols(Path kernelPath, java.util.function.LongFunction<java.util.function.LongFunction<java.util.OptionalLong>> fileOffsets,
                                               dev.kpemu.image.SymbolTableCache.Decoder decoder) throws KernelImageException {
        return dev.kpemu.image.KernelSymbolsInMemory.read(kernelDigest(kernelPath), buildOrNull(), besideKernelCache("symbols"), fileOffsets, decoder);
    }

    /**
     * Sites {@code scan} finds in the kernel's text ({@code kind} names what and where), kept
     * between runs beside the text tables ({@link dev.kpemu.image.KernelSitesCache}), keyed as they are.
     */
    static <E extends Exception> List<Long> keptSites(String kind, Path kernelPath, dev.kpemu.image.KernelSitesCache.Scan<E> scan) throws E {
        return dev.kpemu.image.KernelSitesCache.read(kind, kernelDigest(kernelPath), buildOrNull(), besideKernelCache("text-tables"), scan);
    }

    /** The kernel file's SHA-256 (what its derived tables are kept by), or null without a cache or when it cannot be had. */
    private static String kernelDigest(Path kernelPath) {
        if (kernelCacheDir() == null) return null;
        try {
            return dev.kpemu.image.FileDigests.sha256(kernelPath, digestCacheDir());
        } catch (IOException e) {
            return null;   // read the kernel
        }
    }

    /** kpemu's build ({@link BootSnapshot#build}), or null when it cannot be had. */
    private static String buildOrNull() {
        try {
            return BootSnapshot.build();
        } catch (IOException e) {
            return null;
        }
    }

    /** Where file digests are kept between runs ({@link dev.kpemu.image.FileDigests}): beside the kernel cache, or null. */
    static Path digestCacheDir() {
        return besideKernelCache("digests");
    }

    /** The folder {@code name} beside the kernel cache (what kpemu keeps between runs), or null without a cache. */
    private static Path besideKernelCache(String name) {
        Path k = kernelCacheDir();
        return k == null ? null : k.resolveSibling(name);
    }

    /** -Dkpemu.kernelCache, else {@code <kpemu cache>/kernels} when a cache is configured (-Dkpemu.cache or $KPEMU_CACHE), else null. */
    static Path kernelCacheDir() {
        String k = System.getProperty("kpemu.kernelCache");
        if (k != null && !k.isBlank()) return Path.of(k);
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        return c == null || c.isBlank() ? null : Path.of(c).resolve("kernels");
    }

    /** For experiments: {@code BootRunner [--arch A] [--kernel F] [--initrd F] [--append S] [--memory MiB] [--timeout S]}. */
    public static void main(String[] args) throws Exception {
        Arch arch = Arch.X86_64;
        Path kernel = null, initrd = null;
        String append = null;
        int mem = 256;
        double timeout = 60;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--arch" -> arch = Arch.parse(args[++i]);
                case "--kernel" -> kernel = Path.of(args[++i]);
                case "--initrd" -> initrd = Path.of(args[++i]);
                case "--append" -> append = args[++i];
                case "--memory" -> mem = Integer.parseInt(args[++i]);
                case "--timeout" -> timeout = Double.parseDouble(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Result r = boot(new Options(arch, kernel, initrd, append, mem, timeout, System.err, System.out));
        System.out.printf("kpemu: stats %s%n", r.stats());
        System.out.printf("kpemu: %s (%s) at pc 0x%x %s; guest %.3f s, %d instructions, %d interrupts, host %.2f s; init done at guest %.3f s host %.2f s%n",
                r.status(), r.outcome(), r.pc(), r.symbol(), r.guestNanos() / 1e9, r.instructions(), r.interrupts(),
                r.hostNanos() / 1e9, r.initDoneGuestNanos() / 1e9, r.initDoneHostNanos() / 1e9);
        if (r.outcome() == BootOutcome.GUEST_FAILED) {
            System.out.println("kpemu: last console lines:");
            for (String l : r.lastLines()) System.out.println("  " + l);
        }
        System.exit(r.outcome() == BootOutcome.POWERED_OFF ? 0 : 1);
    }
}
