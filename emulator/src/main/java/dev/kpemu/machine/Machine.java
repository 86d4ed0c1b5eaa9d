package dev.kpemu.machine;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

import dev.kpemu.unicorn.HookFailedException;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.UnicornException;

/**
 * An arch-neutral machine: vCPUs, each on a Unicorn engine of its own (one unless
 * {@link #addCpu} added more), guest-physical memory with named regions, a device bus, a virtual
 * clock and a run loop. The per-arch subclasses
 * ({@code X86Machine}, {@code Arm64Machine}) do what the CPU does and Unicorn does not:
 * exception and interrupt entry, page-table walks, idle instructions.
 *
 * <p>The run loop runs the guest in slices that end at an instruction deadline kept by
 * {@link InstructionClock} (a block hook in C), and never stops the engine from another
 * thread. Between slices it fires due clock events and injects pending interrupts. The engine
 * never runs with Unicorn's own {@code count}: code translated while counting and code
 * translated without it do not mix (unicorn-facts.md).
 *
 * <p><b>Several vCPUs</b> (issue 26, docs/smp-notes.md step 2; bare metal only so far). A vCPU is
 * an engine joined to the machine as {@link #openSecondaryEngine}'s are (RAM, devices, code
 * invalidation shared), its own {@link InstructionClock} (deadline, x86 block cache, break list,
 * text-guard check, virtual TSC and live time), a run state ({@link CpuState}), its own interrupt
 * latch or controller and the arch's and board's CPU set-up ({@link #onCpuAdded}). They run in
 * turn on the calling thread, each for a quantum of guest instructions ended by its own clock, in
 * the order and with the lengths of the machine's {@link Schedule}; the {@link VirtualClock}
 * advances with each one's instructions in turn; device events fire between slices; a vCPU halted
 * on HLT/WFI is skipped until it can wake, and when all are halted the clock idles to the next
 * event. {@link #engine()}, {@link #pc()}, the registers and {@link #pageTables()} answer for the
 * <i>current</i> vCPU ({@link #cpu()}): the one whose hook runs, else the one that ran last. With
 * one vCPU {@link #run} is today's loop, unchanged.
 */
public abstract class Machine implements AutoCloseable {
    /** Slice length in instructions: bounds interrupt latency and the cost of a slice restart. */
    public static final long DEFAULT_SLICE = 200_000;
    /** An address no guest executes: where uc_emu_start's {@code until} points (see docs). */
    static final long NEVER_EXECUTED = 0x7fff_dead_beef_0000L;

    /** The current vCPU's engine ({@link #cpu()}): vCPU 0's unless the machine has several. */
    protected Unicorn uc;
    protected final GuestMemory memory;
    protected final DeviceBus bus;
    protected final VirtualClock clock;
    /** The current vCPU's instruction clock. */
    private InstructionClock icount;
    /** vCPU 0's clock: it owns the text guard's granule bitmap. */
    private final InstructionClock primaryClock;
    private final Map<Long, BreakpointAction> breakpoints = new HashMap<>();
    private StopReason pendingStop;
    /** A stop asked for by another host thread (a signal handler, a terminal reader), taken at the next slice boundary. */
    private volatile StopReason stopFromOtherThread;
    private TrapHandler trapHandler;
    private InterruptController interruptController;
    private long slice = DEFAULT_SLICE;
    private boolean interruptsHeld;
    private boolean closed;
    private static final Unicorn[] NO_ENGINES = {};
    /** Engines opened by {@link #openSecondaryEngine}, sharing memory, devices and code coherence; usually none. */
    private Unicorn[] secondaryEngines = NO_ENGINES;
    private final Watchpoints watchpoints;

    protected Machine(Unicorn uc, long instructionsPerSecond) {
        this.uc = uc;
        this.memory = new GuestMemory(uc);
        this.bus = new DeviceBus(uc, memory);
        this.watchpoints = new Watchpoints(memory, this::cpu, this::changeMemoryMap, reason -> {
            requestStopAtSliceEnd(reason);
            endSliceSoon();
        }, (engine, reason) -> {
            requestStopAtSliceEnd(reason);
            engine.stop();
        }, this::endSliceSoon);
        this.clock = new VirtualClock(instructionsPerSecond);
        this.icount = new InstructionClock(uc, uc.arch() == Unicorn.ARCH_ARM64);
        this.primaryClock = icount;
        this.vcpus = new Vcpu[] {new Vcpu(uc, icount, CpuState.RUNNING)};
        clock.setPendingInstructions(() -> inSlice ? icount.executed() - sliceStart : 0);
        // A device that schedules an event while a slice runs (from a port or MMIO callback)
        // pulls the slice's deadline in, so the event fires on time at the next block boundary.
        clock.setScheduleListener(due -> {
            if (inSlice) icount.lowerDeadline(icount.executed() + clock.instructionsUntil(due));
        });
        skipTranslationTlbWalk(uc);
    }

    /**
     * Unicorn 2.1.4's {@code tb_gen_code} walks every TLB entry of every MMU mode after each block it
     * translates ({@code tlb_reset_dirty_by_vaddr}: it marks the block's page "not dirty" again in
     * every entry that maps it, as its own dirty tracking, stubbed out, cannot), unless a memory
     * hook's range holds the block's address: the largest single cost of an arm64 boot (9-11 % of
     * its CPU time, 12 MMU modes of 256 entries and the victim TLBs, for each of ~65,000
     * translations). A fetch-unmapped hook bounded to the upper half of the address space holds
     * every kernel block's address and is never called: Unicorn bounds that hook by the
     * *physical* address of an unmapped fetch, and guest-physical addresses never reach 2^63.
     * Why the walk is not needed for kernel text: Unicorn sets a page "dirty" (fast, unchecked
     * stores) only through a TLB entry that cannot execute, and Linux writes its text only through
     * such an alias ({@code text_poke}'s) or, at boot, through the executable mapping itself;
     * an alias's entry has another address, which the walk (by the block's address) never
     * reached either. User-space blocks keep the walk.
     */
    private static void skipTranslationTlbWalk(Unicorn uc) {
        uc.hookMemoryEvent(Unicorn.HOOK_MEM_FETCH_UNMAPPED, Long.MIN_VALUE, -1L, (u, type, address, size, value) -> false);
    }

    private boolean inSlice;
    private long sliceStart;
    /** The guest has executed (a slice started): its RAM may hold anything. */
    private boolean ran;

    /** True once the guest has run: before, RAM the host never wrote reads zero. */
    public boolean hasRun() { return ran; }

    public abstract Arch arch();

    /**
     * Opens a new engine configured as this machine's (same CPU model and set-up), for
     * calibrations on a throwaway engine (the snapshot's engine-specific context words).
     */
    public abstract Unicorn openEngineOfSameKind();

    /** {@code -Dkpemu.exitAfterAccess=true}: machine engines keep Unicorn's exit check after every guest load and store. */
    private static final boolean EXIT_AFTER_ACCESS = Boolean.getBoolean("kpemu.exitAfterAccess");

    /**
     * Sets a newly opened machine engine up as every machine runs its engines: without Unicorn's
     * exit check after each guest load and store ({@link Unicorn#setExitAfterAccess}). The machine
     * stops an engine at block starts (the instruction clock's block hook, translation-time
     * breaks), from interrupt hooks (between blocks), and from instruction hooks only to end the
     * run or, at arm64's {@code IC IALLU}, the slice, whose block ends at the {@code ISB} after it:
     * the rest of the block may run first; devices' MMIO callbacks never
     * stop it ({@link #requestStopAtSliceEnd}). The one memory callback that does, a watched store
     * stopped before it is made, is a hook and so keeps the checks while it exists
     * ({@link Watchpoints}). Returns {@code uc}.
     */
    protected static Unicorn machineEngine(Unicorn uc) {
        uc.setExitAfterAccess(EXIT_AFTER_ACCESS);
        return uc;
    }

    /** The current vCPU's engine, for backends and the kprobes engine; prefer the typed methods. */
    public Unicorn engine() { return uc; }

    // ------------------------------------------------------------------ vCPUs

    /** The most vCPUs a machine has. */
    public static final int MAX_CPUS = 64;

    /** A vCPU's run state. */
    public enum CpuState {
        /** Runs when the schedule gives it a quantum. */
        RUNNING,
        /** Executed HLT/WFI: skipped until an interrupt (or, x86, an NMI) lets it go on. */
        HALTED,
        /** Waits for a start ({@link #startCpu}): every vCPU but 0 starts so, as a CPU before INIT/SIPI or PSCI CPU_ON. */
        STOPPED
    }

    /** One vCPU: its engine, its clock, its run state and its interrupt controller. */
    private static final class Vcpu {
        final Unicorn engine;
        final InstructionClock clock;
        CpuState state;
        InterruptController controller;

        Vcpu(Unicorn engine, InstructionClock clock, CpuState state) {
            this.engine = engine;
            this.clock = clock;
            this.state = state;
        }
    }

    private Vcpu[] vcpus;
    private int current;
    private final java.util.List<java.util.function.IntConsumer> cpuSetUps = new java.util.ArrayList<>();
    private Schedule schedule = Schedule.of(Schedule.DEFAULT_SEED);
    /** Instructions left in the current vCPU's quantum (several vCPUs only; kept across runs). */
    private long quantumLeft;
    /** The vCPU that ran the last slice, or -1. */
    private int lastRan = -1;
    private SwitchObserver switchObserver;
    private boolean timeStampCounterHooked;
    private long switches;
    private long yields;

    /** {@link #keepStackPageWritable}'s range, or null. */
    private long[] stackPageRange;

    /**
     * x86: keeps the page of a stack pointer in [{@code low}, {@code high}) (guest-virtual; a range
     * that holds no code, as Linux's .data with init_task's stack) out of Unicorn's store slow path
     * on every vCPU, those added later too ({@link InstructionClock#keepStackPageWritable}). Guest
     * state and every count stay as they are; only the host's cost of those stores changes. False,
     * and nothing done, when the clock library or libunicorn cannot (arm64, other builds).
     */
    public boolean keepStackPageWritable(long low, long high) {
        boolean all = true;
        for (Vcpu v : vcpus) all &= v.clock.keepStackPageWritable(low, high);
        if (all) stackPageRange = new long[] {low, high};
        return all;
    }

    /**
     * x86: keeps the pages a rep string instruction stores to in [{@code low}, {@code high})
     * (guest-virtual, a range that holds no code, as Linux's .bss and .brk, which clear_bss zeroes
     * byte by byte) out of Unicorn's store slow path, on the boot vCPU (vCPU 0, the one that runs
     * clear_bss), until the range has been stored over ({@link InstructionClock#keepStringStoresWritable}).
     * As {@link #keepStackPageWritable}: only the host's cost changes. False, and nothing done,
     * when the clock library or libunicorn cannot.
     */
    public boolean keepStringStoresWritable(long low, long high) {
        return vcpus[0].clock.keepStringStoresWritable(low, high);
    }

    /** Pages {@link #keepStringStoresWritable} has marked (on the boot vCPU, the only one it marks on). */
    public long stringStorePagesMarked() {
        return vcpus[0].clock.stringStorePagesMarked();
    }

    /** Stack pages {@link #keepStackPageWritable} has marked, over every vCPU. */
    public long stackPagesMarked() {
        long n = 0;
        for (Vcpu v : vcpus) n += v.clock.stackPagesMarked();
        return n;
    }

    /** The current vCPU's index: the one whose hook runs, else the one that ran last (0 with one vCPU). */
    public int cpu() { return current; }

    /** The number of vCPUs. */
    public int cpuCount() { return vcpus.length; }

    /** vCPU {@code cpu}'s engine (set its registers between runs; while it runs, {@link #engine()} is it). */
    public Unicorn engine(int cpu) { return vcpus[cpu].engine; }

    /** vCPU {@code cpu}'s run state. */
    public CpuState cpuState(int cpu) { return vcpus[cpu].state; }

    /**
     * Adds a vCPU (between runs) and returns its index: an engine of the machine's kind joined as
     * {@link #openSecondaryEngine}'s (RAM, MMIO windows and port hooks, code invalidation), with an
     * instruction clock of its own holding every host breakpoint and the text guard, the arch's
     * exception, interrupt, system-call/SVC and hypercall hooks, the virtual TSC when vCPU 0 has
     * it, then every board set-up registered with {@link #onCpuAdded}. It starts
     * {@link CpuState#STOPPED}: {@link #startCpu} sets its PC and lets it run. Its other registers
     * are the engine's reset state plus the arch's ({@code X86Machine}: none, long mode is the
     * caller's; {@code Arm64Machine}: EL1h with DAIF masked, as vCPU 0).
     *
     * <p>Exception and interrupt entry on vCPUs above 0 is vCPU 0's code on their own engine and
     * registers; what {@code SmpScheduleTest} exercises there: x86 external-interrupt delivery
     * through the vCPU's own IDT from its own latch and its wake from HLT; arm64 the end of WFI on
     * its own latch; host breakpoints and the text guard on both. Not exercised on vCPUs above 0:
     * faults, {@code syscall}/SVC, int3/BRK to the trap handler (kprobes keeps one control block
     * per machine until step 5), hypercalls (PSCI answers for one PE until step 4), NMIs. Not per
     * vCPU yet: {@link #holdInterrupts} (machine-wide), arm64's board interrupt controller and
     * timers (vCPU 0's; the others have a latch unless given a controller). The x86 board with
     * several CPUs gives each its own local APIC ({@code X86Pc}); booted Linux runs faults,
     * {@code syscall} and IPIs on every vCPU there ({@code X86SmpBootTest}).
     */
    public int addCpu() {
        if (closed) throw new IllegalStateException("machine closed");
        if (inSlice) throw new IllegalStateException("vCPUs are added between runs");
        if (vcpus.length >= MAX_CPUS) throw new IllegalStateException("at most " + MAX_CPUS + " vCPUs");
        int index = vcpus.length;
        Unicorn e = openEngineOfSameKind();
        InstructionClock c;
        try {
            skipTranslationTlbWalk(e);
            memory.join(e);
            try {
                bus.join(e);
                watchpoints.join(e);
                c = new InstructionClock(e, e.arch() == Unicorn.ARCH_ARM64);
                if (timeStampCounterHooked) c.hookTimeStampCounter();
                for (long va : breakpoints.keySet()) c.addBreak(va);
                if (textGuard != null) c.shareGuard(primaryClock, textGuard.nativeState());
                if (stackPageRange != null) c.keepStackPageWritable(stackPageRange[0], stackPageRange[1]);
            } catch (RuntimeException ex) {
                memory.leave(e);
                throw ex;
            }
        } catch (RuntimeException ex) {
            e.close();
            throw ex;
        }
        Vcpu[] more = java.util.Arrays.copyOf(vcpus, index + 1);
        more[index] = new Vcpu(e, c, CpuState.STOPPED);
        vcpus = more;
        if (recordedHitConsumer != null) e.beforeUpcalls(this::drainRecordedHits);
        addArchCpu(index, e);
        for (var setUp : cpuSetUps) setUp.accept(index);
        return index;
    }

    /**
     * Registers a board's per-vCPU set-up (x86: the CPUID policy; arm64: the generic timer's
     * system-register hooks), run for every vCPU {@link #addCpu} adds from now on with its index;
     * the board does vCPU 0's itself.
     */
    public void onCpuAdded(java.util.function.IntConsumer setUp) { cpuSetUps.add(setUp); }

    /**
     * Starts vCPU {@code cpu} at {@code pc} (between runs, or from a hook of another vCPU): its PC
     * is set and it runs from the next time the schedule picks it. What INIT/SIPI and PSCI CPU_ON
     * will call (step 4); the rest of its state is the caller's.
     */
    public void startCpu(int cpu, long pc) {
        Vcpu v = vcpus[cpu];
        if (cpu == current && inSlice) throw new IllegalStateException("vCPU " + cpu + " is running");
        int was = current;
        select(cpu);
        try {
            setPc(pc);
        } finally {
            select(was);
        }
        v.state = CpuState.RUNNING;
    }

    /** Stops vCPU {@code cpu} until the next {@link #startCpu} (CPU_OFF); the running one stops at its next block. */
    public void stopCpu(int cpu) {
        vcpus[cpu].state = CpuState.STOPPED;
        if (cpu == current) endSliceSoon();
    }

    /**
     * Sets the schedule (between runs): the machine runs a copy from its start, whatever the given
     * one has drawn. The default is {@link Schedule#of}({@link Schedule#DEFAULT_SEED}). No effect
     * with one vCPU.
     */
    public void setSchedule(Schedule s) {
        if (inSlice) throw new IllegalStateException("the schedule is set between runs");
        schedule = s.fresh();
        quantumLeft = 0;
    }

    public Schedule schedule() { return schedule; }

    /** Switches from one vCPU to another so far (several vCPUs only). */
    public long cpuSwitches() { return switches; }

    /**
     * Ends the current vCPU's quantum when another vCPU can run (is not halted or stopped), for a
     * host breakpoint action at a spin-wait (docs/smp-notes.md, "Where the time of several CPUs
     * goes"): the vCPUs run in turn on one thread, so what a spinning vCPU waits for can only
     * happen while another runs. The schedule then picks the next vCPU as at a quantum's end. No
     * effect with one vCPU or when no other can run; deterministic (a function of the vCPUs'
     * states). Returns whether the quantum ended.
     */
    public boolean yieldQuantum() {
        if (vcpus.length < 2) return false;
        for (int i = 0; i < vcpus.length; i++) {
            if (i != current && vcpus[i].state == CpuState.RUNNING) {
                quantumLeft = 0;
                yields++;
                return true;
            }
        }
        return false;
    }

    /** Quanta ended early by {@link #yieldQuantum} so far. */
    public long quantumYields() { return yields; }

    /** Sees every switch to another vCPU (several vCPUs only), e.g. to record an interleaving. */
    @FunctionalInterface
    public interface SwitchObserver {
        /** vCPU {@code cpu} is about to run from {@code pc}, for a quantum of {@code quantum} instructions. */
        void switchedTo(int cpu, long pc, long quantum);
    }

    public void setSwitchObserver(SwitchObserver o) { this.switchObserver = o; }

    /** Makes {@code cpu} the current vCPU: the machine's and the arch's per-vCPU views follow. */
    private void select(int cpu) {
        if (cpu == current) return;
        Vcpu v = vcpus[cpu];
        current = cpu;
        uc = v.engine;
        icount = v.clock;
        interruptController = v.controller;
        selectArchCpu(cpu);
    }

    /** The arch's per-vCPU set-up of a vCPU {@link #addCpu} added (its hooks, its contexts); vCPU 0's is the constructor's. */
    protected abstract void addArchCpu(int cpu, Unicorn engine);

    /** The current vCPU is now {@code cpu}: the arch's per-vCPU fields follow. */
    protected abstract void selectArchCpu(int cpu);

    /**
     * vCPU {@code cpu} stops running and another runs next (several vCPUs only): what a switch must
     * do to the outgoing CPU (arm64: clear its exclusive monitor). {@code cpu} is not the current one.
     */
    protected void descheduled(int cpu) {}

    /** The current vCPU's engine returned by itself: true when it executed an idle instruction (HLT, WFI). */
    protected abstract boolean stoppedAtIdleInstruction();

    /** The current vCPU, halted on its idle instruction, would go on now (an interrupt or NMI it takes or that ends WFI). */
    protected abstract boolean idleEnds();

    /** The current vCPU, halted, can still be woken by an interrupt to come (x86: IF set; arm64 WFI: always). */
    protected abstract boolean mayWakeLater();

    /**
     * Opens another engine of this machine's kind ({@link #openEngineOfSameKind}) joined to this
     * machine: it maps the same guest RAM (every region, also those added later: {@link GuestMemory}),
     * reaches the same devices through the same MMIO windows and, on x86, port I/O hooks
     * ({@link DeviceBus}), and every drop of translated code the host makes
     * ({@link #invalidateCode}, {@link #flushTranslations}) is made in it too. The machine owns it:
     * it is closed with the machine, and must not be closed by the caller.
     *
     * <p>The seed of one engine per vCPU (docs/smp-notes.md, step 1), and no more than that yet: the
     * engine is not a CPU of the machine. The run loop never runs it; it has no instruction clock
     * (no deadline, block cache, host breakpoints, text guard check, virtual TSC or live time), no
     * interrupt, exception, invalid-instruction, {@code syscall}/SVC or hypercall hooks, and none of
     * the board's CPU set-up (x86 CPUID policy, long mode, arm64 system-register filters). Whoever
     * runs it ({@link Unicorn#start}) sets its registers and handles what it reports.
     */
    public Unicorn openSecondaryEngine() {
        if (closed) throw new IllegalStateException("machine closed");
        Unicorn e = openEngineOfSameKind();
        try {
            skipTranslationTlbWalk(e);
            memory.join(e);
            try {
                bus.join(e);
                watchpoints.join(e);
            } catch (RuntimeException ex) {
                memory.leave(e);
                throw ex;
            }
        } catch (RuntimeException ex) {
            e.close();
            throw ex;
        }
        Unicorn[] more = java.util.Arrays.copyOf(secondaryEngines, secondaryEngines.length + 1);
        more[more.length - 1] = e;
        secondaryEngines = more;
        return e;
    }

    /** The engines {@link #openSecondaryEngine} opened, in order (without {@link #engine()}). */
    public java.util.List<Unicorn> secondaryEngines() { return java.util.List.of(secondaryEngines); }

    public GuestMemory memory() { return memory; }

    public DeviceBus bus() { return bus; }

    /** The machine's data watchpoints on physical ranges, in every engine ({@link Watchpoints}). */
    public Watchpoints watchpoints() { return watchpoints; }

    public VirtualClock clock() { return clock; }

    // ------------------------------------------------------------------ hits recorded natively

    /** Every vCPU's ring of recorded hits, or null: the arch or the library records none. */
    private PerCpuProbeHits probeHits;

    /**
     * The probe hits this machine's native code can record without an upcall
     * ({@link RecordedProbeHits}: every vCPU's), or null: a library without it.
     */
    public RecordedProbeHits recordedProbeHits() { return probeHits; }

    /** The arch's ring of vCPU {@code cpu}'s recorded hits, filled by that vCPU's native hook (vCPU 0's first, then in order). */
    protected final void recordProbeHits(int cpu, NativeProbeHits ring) {
        if (probeHits == null) probeHits = new PerCpuProbeHits(this::cpu);
        ring.liveTime(vcpus[cpu].clock.liveTimeFields(clock.nanosPerInstruction()));
        probeHits.add(cpu, ring);
    }

    /** vCPU {@code cpu}'s count of executed instructions, where native code reads it. */
    protected final java.lang.foreign.MemorySegment executedCounter(int cpu) { return vcpus[cpu].clock.executedCounter(); }

    private RecordedProbeHits.Reader recordedHitConsumer;

    /**
     * Who reads the recorded hits back: the machine hands them over, oldest first, at the start of
     * every hook upcall of its engines and when a slice's engine run returns (before the slice is
     * charged to the clock, so {@link #liveNanosAtExecuted} gives each hit's guest time).
     */
    public void consumeRecordedHits(RecordedProbeHits.Reader consumer) {
        recordedHitConsumer = consumer;
        for (Vcpu v : vcpus) v.engine.beforeUpcalls(consumer == null ? null : this::drainRecordedHits);
    }

    /** Hands the recorded hits that wait to their consumer. */
    public final void drainRecordedHits() {
        RecordedProbeHits h = recordedProbeHits();
        var c = recordedHitConsumer;
        if (h != null && c != null && h.pending()) h.drainTo(c);
    }

    /** The guest time of a point of the running slice where the instruction clock read {@code executed}. */
    public long liveNanosAtExecuted(long executed) {
        return clock.liveNanosAt(inSlice ? executed - sliceStart : 0);
    }

    public abstract long pc();

    public abstract void setPc(long pc);

    public abstract long sp();

    /**
     * A walker for the guest's current page tables (or identity when paging is off), with the
     * translation registers read when it is made: valid until the guest runs again.
     */
    public abstract PageTableWalker pageTables();

    /**
     * Maps [va, va + size) (inside one last-level table) onto [pa, …) in the guest's current
     * kernel page tables, read-only and executable for the kernel, as the host's own area (the
     * kprobes engine's out-of-line slots). A table missing at level {@code l} below the root is
     * linked to page {@code tablePages.applyAsLong(l)}, zeroed and owned by the caller. The arch's
     * format ({@link dev.kpemu.machine.x86.X86PageMapper}, {@link dev.kpemu.machine.arm64.Arm64PageMapper});
     * the caller flushes the TLB.
     */
    public abstract void mapKernelPages(long va, long pa, long size, java.util.function.IntToLongFunction tablePages);

    /**
     * Connects the interrupt controller in front of vCPU 0 (the 8259 pair, the GIC): from then
     * on {@link #setInterruptLine} drives its inputs and the backend takes an interrupt when its
     * output is asserted. Without one, each backend latches raised lines itself (bare-metal tests).
     */
    public void setInterruptController(InterruptController c) { setInterruptController(0, c); }

    /** Connects the interrupt controller in front of vCPU {@code cpu}. */
    public void setInterruptController(int cpu, InterruptController c) {
        vcpus[cpu].controller = c;
        if (cpu == current) this.interruptController = c;
    }

    /** The current vCPU's interrupt controller, or null. */
    public InterruptController interruptController() { return interruptController; }

    /** vCPU {@code cpu}'s interrupt controller, or null. */
    public InterruptController interruptController(int cpu) { return vcpus[cpu].controller; }

    /** Raises (or lowers) the external interrupt line {@code irq} of vCPU 0's interrupt controller (or latch). */
    public void setInterruptLine(int irq, boolean level) { setInterruptLine(0, irq, level); }

    /**
     * Raises (or lowers) line {@code irq} of vCPU {@code cpu}'s interrupt controller, or without
     * one its own latch (see the arch machine); a halted vCPU it lets go on is woken at the next
     * slice boundary.
     */
    public abstract void setInterruptLine(int cpu, int irq, boolean level);

    /** Installs the host's first look at breakpoint traps (the kprobes engine). */
    public void setTrapHandler(TrapHandler h) {
        if (trapHandler != null && trapHandler.faultInterest() != null) trapHandler.faultInterest().listen(null);
        this.trapHandler = h;
        if (h != null && h.faultInterest() != null) h.faultInterest().listen(this::faultConsumersChanged);
        faultConsumersChanged();
    }

    /**
     * Whether the trap handler must see every fault natively delivered code could take: one is
     * installed and says nothing narrower ({@link TrapHandler#faultInterest} null or {@link
     * FaultInterest#seesAll}).
     */
    protected boolean trapHandlerSeesAllFaults() {
        TrapHandler th = trapHandler;
        if (th == null) return false;
        FaultInterest fi = th.faultInterest();
        return fi == null || fi.seesAll() || !NARROW_FAULT_INTEREST;
    }

    /** {@code -Dkpemu.faultInterest=false}: a trap handler sees every fault, whatever it asks (the path before, for comparisons). */
    private static final boolean NARROW_FAULT_INTEREST = !"false".equals(System.getProperty("kpemu.faultInterest"));

    /** The pcs whose faults the trap handler owns, {@code {low, high}} (empty: {@code {0, 0}}). */
    protected long[] trapHandlerPcs() {
        TrapHandler th = trapHandler;
        FaultInterest fi = th == null ? null : th.faultInterest();
        return fi == null ? new long[] {0, 0} : new long[] {fi.pcLow(), fi.pcHigh()};
    }

    /**
     * The trap handler, its {@link FaultInterest} or the guarded text changed: an arch machine whose
     * native hooks deliver faults without the Java path asks which faults must still reach Java
     * ({@link #trapHandlerSeesAllFaults}, {@link #trapHandlerPcs}, {@link #textGuard}'s physical span).
     */
    protected void faultConsumersChanged() {}

    /**
     * Guest faults (x86 exceptions, arm64 data and instruction aborts) the vCPUs' native hooks
     * delivered without the Java path so far; 0 on a machine or library without them.
     */
    public long faultsDeliveredNatively() { return 0; }

    /** The guarded text's physical span ({@link TextGuard#physicalSpanLow}), {@code {0, 0}} without guarded text. */
    protected long[] guardedPhysicalSpan() {
        return textGuard == null ? new long[] {0, 0} : new long[] {textGuard.physicalSpanLow(), textGuard.physicalSpanHigh()};
    }

    public TrapHandler trapHandler() { return trapHandler; }

    /**
     * Holds external interrupts back while the host is in the middle of something the guest must
     * not see interrupted (kprobes: between a probe hit and the end of its out-of-line step).
     * Pending interrupts are injected at the first slice boundary after the hold ends.
     */
    public void holdInterrupts(boolean hold) { this.interruptsHeld = hold; }

    public boolean interruptsHeld() { return interruptsHeld; }

    /** Offers a non-breakpoint exception to the trap handler first (see {@link TrapHandler#onFault}). */
    protected boolean faultResolvedByHost(long pc, int trapnr) {
        TrapHandler th = trapHandler;
        return th != null && th.onFault(this, pc, trapnr);
    }

    public void setSliceInstructions(long n) {
        if (n <= 0) throw new IllegalArgumentException("slice must be positive");
        slice = n;
    }

    /** The configured slice length; subclasses may run shorter slices ({@link #nextSliceLength}). */
    public long sliceInstructions() { return slice; }

    /**
     * Length of the next slice. An arch machine may shorten it, e.g. while an interrupt waits
     * for the guest to unmask it and the native interrupt-enable watch is not available.
     */
    protected long nextSliceLength() { return slice; }

    /**
     * Ends the running slice at the next translated-block boundary, so the run loop can act on
     * something a device or hook just did (raise an interrupt). Safe from MMIO callbacks, unlike
     * {@link Unicorn#stop()}: the stop happens in the instruction-clock block hook, never inside
     * the memory access. Outside a slice it does nothing.
     */
    public void endSliceSoon() {
        if (inSlice) icount.lowerDeadline(icount.executed());
    }

    /**
     * True when the engine can end a slice exactly where the guest enables interrupts
     * ({@link #watchInterruptEnable}); false with an older native clock library.
     */
    public static boolean canWatchInterruptEnable() { return InstructionClock.canWatchInterrupts(); }

    /**
     * While on, the running slice ends before the first translated block that starts with
     * interrupts enabled: an arch machine turns it on when an interrupt waits for the guest to
     * unmask it, so the interrupt is taken right after the unmask (kpemu_clock.c explains why
     * block starts are exact). Without library support it does nothing.
     */
    protected void watchInterruptEnable(boolean on) { icount.watchInterrupts(on); }

    private TextGuard textGuard;

    /**
     * The machine's guarded text (created on first use): ranges the host patched, checked natively
     * when a block that contains one is translated (see {@link TextGuard}).
     */
    public TextGuard textGuard() {
        if (textGuard == null) {
            textGuard = new TextGuard(memory, primaryClock.granules());
            memory.observeWrites(textGuard);
            textGuard.onSpanGrown(this::faultConsumersChanged);
            primaryClock.attachGuard(textGuard.nativeState());
            for (int i = 1; i < vcpus.length; i++) vcpus[i].clock.shareGuard(primaryClock, textGuard.nativeState());
            faultConsumersChanged();
        }
        return textGuard;
    }

    /** x86: the guest's {@code rdtsc}/{@code rdtscp} read the virtual clock (in instruction periods), never the host. */
    protected void useVirtualTimeStampCounter() {
        for (Vcpu v : vcpus) v.clock.hookTimeStampCounter();
        timeStampCounterHooked = true;
    }

    /**
     * The instruction clock's native state for a native hook that reads the live guest time
     * ({@code kpemu_sysreg_filter}'s system counter), or null when the library cannot.
     */
    public java.lang.foreign.MemorySegment nativeLiveTime() { return nativeLiveTime(current); }

    /** As {@link #nativeLiveTime()}, for vCPU {@code cpu}'s clock (a native hook of its engine). */
    public java.lang.foreign.MemorySegment nativeLiveTime(int cpu) { return vcpus[cpu].clock.liveTimeState(clock.nanosPerInstruction()); }

    /** The x86 time stamp counter the guest reads now (guest time in instruction periods). */
    public long timeStampCounter() { return icount.timeStampCounter(); }

    /** Slices ended by the interrupt-enable watch so far. */
    public long interruptWatchStops() { return icount.watchStops(); }

    // ------------------------------------------------------------------ virtual memory

    /** Reads guest-virtual memory through the current page tables (ignoring permissions). */
    public byte[] readVirtual(long va, int len) {
        byte[] out = new byte[len];
        int done = 0;
        while (done < len) {
            long a = va + done;
            PageTableWalker.Translation t = translateOrThrow(a);
            int n = (int) Math.min(len - done, t.pageSize() - (a & (t.pageSize() - 1)));
            memory.read(t.physical(), out, done, n);
            done += n;
        }
        return out;
    }

    /** Writes guest-virtual memory through the current page tables (ignoring permissions). */
    public void writeVirtual(long va, byte[] data) {
        int done = 0;
        while (done < data.length) {
            long a = va + done;
            PageTableWalker.Translation t = translateOrThrow(a);
            int n = (int) Math.min(data.length - done, t.pageSize() - (a & (t.pageSize() - 1)));
            memory.write(t.physical(), data, done, n);
            done += n;
        }
    }

    public long readVirtualLong(long va) {
        PageTableWalker.Translation t = translateOrThrow(va);
        if ((va & (t.pageSize() - 1)) <= t.pageSize() - 8) return memory.readLong(t.physical());
        byte[] b = readVirtual(va, 8);
        long v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | (b[i] & 0xff);
        return v;
    }

    public void writeVirtualLong(long va, long value) {
        PageTableWalker.Translation t = translateOrThrow(va);
        if ((va & (t.pageSize() - 1)) <= t.pageSize() - 8) {
            memory.writeLong(t.physical(), value);
            return;
        }
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) b[i] = (byte) (value >>> (8 * i));
        writeVirtual(va, b);
    }

    /** Translates or throws {@link GuestMemoryException} (an unmapped guest-virtual address). */
    public PageTableWalker.Translation translateOrThrow(long va) {
        PageTableWalker.Translation t = pageTables().translate(va);
        if (t == null) throw new GuestMemoryException(va);
        return t;
    }

    /** A guest-virtual address has no mapping in the current page tables. */
    public static final class GuestMemoryException extends RuntimeException {
        private final long address;

        public GuestMemoryException(long address) {
            super("guest virtual address 0x" + Long.toHexString(address) + " is not mapped");
            this.address = address;
        }

        public long address() { return address; }
    }

    /**
     * Drops translated code for a range after the host patched guest text there (Unicorn does not
     * notice writes made through its memory API), in every engine of the machine: a host write
     * drops nothing in any engine by itself, and each engine keeps its own translations
     * (docs/smp-notes.md, facts b and c). Each engine finds the blocks by translating {@code va}
     * through its own current page tables.
     */
    public void invalidateCode(long va, long len) {
        Vcpu[] cpus = vcpus;
        for (int i = 0; i < cpus.length; i++) {
            dropTranslations(cpus[i].engine, va, len);
            cpus[i].clock.forgetBlocks();
        }
        Unicorn[] others = secondaryEngines;
        for (int i = 0; i < others.length; i++) dropTranslations(others[i], va, len);
    }

    /**
     * Drops translated code for [va, va + len) in vCPU {@code cpu}'s engine alone (its own current
     * page tables translate {@code va}) and forgets its clock's block cache: what that CPU's
     * serializing step makes it see of text another CPU wrote (x86 Linux's {@code do_sync_core},
     * {@code X86LinuxGuest}). {@link #invalidateCode(long, long)} drops in every engine.
     */
    public void invalidateCode(int cpu, long va, long len) {
        dropTranslations(vcpus[cpu].engine, va, len);
        vcpus[cpu].clock.forgetBlocks();
    }

    /**
     * A guest's own instruction-cache maintenance on vCPU {@code cpu} for [va, va + len) (arm64 IC
     * IVAU): drops the range in every other vCPU's engine (each translating {@code va} through its
     * own current page tables) and forgets their clocks' block caches, and in the secondary
     * engines. The issuing engine needs nothing: its own guest stores dropped its blocks (fact b of
     * docs/smp-notes.md).
     */
    protected void dropCodeInOtherCpus(int cpu, long va, long len) {
        Vcpu[] cpus = vcpus;
        for (int i = 0; i < cpus.length; i++) {
            if (i == cpu) continue;
            dropTranslations(cpus[i].engine, va, len);
            cpus[i].clock.forgetBlocks();
        }
        Unicorn[] others = secondaryEngines;
        for (int i = 0; i < others.length; i++) dropTranslations(others[i], va, len);
    }

    /** As {@link #dropCodeInOtherCpus}, for all code (arm64 IC IALLU, IC IALLUIS): every other engine's translations flushed. */
    protected void flushCodeInOtherCpus(int cpu) {
        Vcpu[] cpus = vcpus;
        for (int i = 0; i < cpus.length; i++) {
            if (i == cpu) continue;
            cpus[i].engine.flushTranslationCache();
            cpus[i].clock.forgetBlocks();
        }
        for (Unicorn e : secondaryEngines) e.flushTranslationCache();
    }

    /**
     * Drops {@code engine}'s translated code for [va, va + len) ({@code TB_REMOVE_CACHE}); an arch
     * machine guards what the engine's translation of {@code va} may do to its CPU state.
     */
    protected void dropTranslations(Unicorn engine, long va, long len) {
        engine.removeTranslationCache(va, va + len);
    }

    /** Runs a host change of {@code engine}'s memory map or code cache, keeping the CPU state the engine may disturb doing it (x86). */
    protected void keepingCpuState(Unicorn engine, Runnable change) {
        change.run();
    }

    /**
     * Applies {@code change} to {@code engine}'s memory map ({@link Watchpoints}' page permissions),
     * then drops the engine's whole TLB and translated code, and its vCPU clock's block cache.
     */
    void changeMemoryMap(Unicorn engine, Runnable change) {
        keepingCpuState(engine, () -> {
            change.run();
            engine.flushTlb();
            engine.flushTranslationCache();
        });
        for (Vcpu v : vcpus) if (v.engine == engine) v.clock.forgetBlocks();
    }

    // ------------------------------------------------------------------ breakpoints and stops

    /**
     * A host breakpoint: {@link #run} returns {@link StopReason.Breakpoint} before executing
     * {@code va}. Breakpoints are checked natively when Unicorn translates the block there
     * ({@link InstructionClock}), never by a Unicorn code hook (whose presence makes Unicorn
     * mis-execute Linux), so {@code va} must start a translated block: a branch or call target
     * such as a function entry.
     */
    public void addBreakpoint(long va) {
        addBreakpoint(va, null);
    }

    /**
     * A host breakpoint with an action run when the guest reaches it: returning true goes on
     * running (the action may also move the PC); false stops as {@link #addBreakpoint(long)}.
     */
    public void addBreakpoint(long va, BreakpointAction action) {
        for (Vcpu v : vcpus) v.clock.addBreak(va);
        breakpoints.put(va, action);
    }

    /**
     * Host breakpoints at every address of {@code vas} with the same action, as
     * {@link #addBreakpoint(long, BreakpointAction)} adds each, but with one flush of the
     * translation cache for all the user-space addresses instead of one per address.
     */
    public void addBreakpoints(long[] vas, BreakpointAction action) {
        for (Vcpu v : vcpus) v.clock.addBreaks(vas);
        for (long va : vas) breakpoints.put(va, action);
    }

    /**
     * Host breakpoints at instructions that need not start a block (a uprobe at any offset), with
     * the same action: as {@link #addBreakpoints}, and a block translated with one of them strictly
     * inside stops before it runs; the next slice then runs that block alone with the address as
     * Unicorn's exit (so the block ends before it) and the stop there is the breakpoint's hit. Costs
     * two more slices a hit than a block start's; the list holds {@code InstructionClock.MAX_MIDS}.
     */
    public void addInstructionBreakpoints(long[] vas, BreakpointAction action) {
        for (Vcpu v : vcpus) v.clock.addMids(vas);
        for (long va : vas) breakpoints.put(va, action);
    }

    /** What to do when the guest reaches a host breakpoint. */
    @FunctionalInterface
    public interface BreakpointAction {
        /** Returns true to go on running. */
        boolean hit(Machine machine, long address);
    }

    /** True when a host breakpoint is set at {@code va}. */
    public boolean hasBreakpoint(long va) { return breakpoints.containsKey(va); }

    /**
     * The host breakpoint the last {@link #run} stopped at (also after a snapshot restore: the
     * stop the saved machine had returned), or -1 when it stopped for another reason.
     */
    public long stoppedAtBreakpoint() { return pendingStop instanceof StopReason.Breakpoint b ? b.address() : -1; }

    /**
     * For a breakpoint action: the start and size of the block the guest ran just before the one at
     * the breakpoint (the block whose branch, return or fall-through led there), or null when not
     * known (the hit came at a slice's start, or is an instruction breakpoint's).
     */
    public long[] breakpointArrivalBlock() {
        long pc = icount.arrivalBlock();
        return pc == 0 ? null : new long[] {pc, icount.arrivalBlockSize()};
    }

    public void removeBreakpoint(long va) {
        if (!breakpoints.containsKey(va)) return;
        breakpoints.remove(va);
        for (Vcpu v : vcpus) v.clock.removeBreak(va);
    }

    /**
     * Stops the run loop at the next safe point with {@code reason}. Safe from interrupt, code
     * and block hooks; from MMIO callbacks it takes effect at the end of the slice.
     */
    public void requestStop(StopReason reason) {
        if (pendingStop == null) pendingStop = reason;
        uc.stop();
    }

    /**
     * From a hook of the current vCPU's engine: flush that engine's translated code as soon as it
     * stops, which it does at once (arm64 IC IALLU: the engine may be running blocks chained to
     * others, so it cannot be flushed inside its run); the slice then ends there and the run goes on.
     */
    protected void flushOwnCodeAtSliceEnd() {
        ownCodeFlush = true;
        uc.stop();
    }

    private boolean ownCodeFlush;

    /** Records a stop without touching the engine (for MMIO callbacks, where stopping replays the access). */
    public void requestStopAtSliceEnd(StopReason reason) {
        if (pendingStop == null) pendingStop = reason;
    }

    /**
     * Stops the run loop at the next slice boundary; unlike {@link #requestStop} it may be called
     * from any thread (a signal handler, a terminal reader): it never touches the engine, the run
     * loop reads the request between slices (at most one slice later, or at once when idle).
     */
    public void requestStopFromAnyThread(StopReason reason) {
        if (stopFromOtherThread == null) stopFromOtherThread = reason;
    }

    /** True when a stop has been requested and the run loop will return it at its next safe point. */
    protected boolean stopPending() { return pendingStop != null || stopFromOtherThread != null; }

    // ------------------------------------------------------------------ snapshot state

    private final Map<String, Stateful> stateParts = new LinkedHashMap<>();

    /**
     * Registers a part whose state a snapshot carries (a device, an interrupt controller), under
     * a name unique in this machine; parts are saved and restored in registration order, after
     * the machine's own state (the clock first).
     */
    public <T extends Stateful> T registerState(String name, T part) {
        if (stateParts.putIfAbsent(name, part) != null) throw new IllegalArgumentException("state part " + name + " registered twice");
        return part;
    }

    /** The registered parts, in order. */
    public Map<String, Stateful> stateParts() { return Collections.unmodifiableMap(stateParts); }

    /**
     * Throws unless the machine is at a point a snapshot can be taken: between runs, no host
     * interrupt hold, no trap handler (a kprobes engine keeps host state a snapshot does not
     * carry: take snapshots before attaching probes).
     */
    public void checkSnapshotPoint() {
        if (closed) throw new IllegalStateException("machine closed");
        if (inSlice) throw new IllegalStateException("a snapshot cannot be taken while the guest runs");
        if (interruptsHeld) throw new IllegalStateException("a snapshot cannot be taken while the host holds interrupts");
        if (trapHandler != null) throw new IllegalStateException("a snapshot cannot be taken with probes attached (take it before attaching them)");
    }

    /**
     * Writes the machine's own state: the clock, the host breakpoint the last run stopped at
     * (restored, the next run steps over it as this machine's would), then the arch's
     * ({@link #saveArchState}). The CPU registers, memory and parts are the snapshot's.
     *
     * <p>With several vCPUs (issue 26) then their run: the vCPU count, the current vCPU (the one
     * {@link #engine()} answers for, which reached the breakpoint), the one that ran last, what is
     * left of its quantum, the switches so far, the schedule (seed, round-robin quantum, its
     * generator's {@link Schedule#position}), each vCPU's {@link CpuState} and the vCPU the
     * breakpoint stop names. Each vCPU's {@link InstructionClock} has nothing to carry: its count
     * is only ever read relative to a slice's start, its deadline, virtual TSC offset, live time
     * and interrupt watch are set again before every slice ({@link #runSlice}, {@link #beforeSlice},
     * which a slice after a snapshot point always runs first: no interrupt hold there), its block
     * cache and break drops are emptied here in both machines ({@link #flushTranslations}), and a
     * skip-once comes from the breakpoint stop. One vCPU writes exactly what it always did.
     */
    public void saveState(DataOutput out) throws IOException {
        checkSnapshotPoint();
        clock.saveState(out);
        out.writeLong(pendingStop instanceof StopReason.Breakpoint b ? b.address() : -1);
        saveArchState(out);
        if (vcpus.length > 1) {
            out.writeInt(vcpus.length);
            out.writeInt(current);
            out.writeInt(lastRan);
            out.writeLong(quantumLeft);
            out.writeLong(switches);
            out.writeLong(schedule.seed());
            out.writeLong(schedule.quantum());
            out.writeLong(schedule.position());
            for (Vcpu v : vcpus) out.writeByte(v.state.ordinal());
            out.writeInt(pendingStop instanceof StopReason.Breakpoint b ? b.cpu() : -1);
        }
        flushTranslations();
    }

    /**
     * Empties the TLB and translated code of every engine (between runs): done at a snapshot point in the
     * saved machine as in the restored one, which starts with none, and by whoever wants a run
     * that passes that point without a snapshot to continue as they do (probes registered at
     * {@code run_init_process}). The TLB is a cache the guest can see: an entry
     * the guest left stale (Linux may change a page's permissions without a TLB invalidation
     * and take the spurious fault if it comes) makes one fault more or less, so both machines
     * must continue from the same, empty, caches to run the same instructions.
     * Measured on arm64 (Debian 12's 6.1, the {@code open} script): without this in the saved
     * machine, the restored run executed 22,855 instructions fewer to power-off (893,276,653 vs
     * 893,299,508), the same events a few microseconds earlier; with it, both runs are equal.
     */
    public void flushTranslations() {
        for (Vcpu v : vcpus) {
            v.engine.flushTlb();
            v.engine.flushTranslationCache();
            v.clock.forgetBlocks();
        }
        for (Unicorn e : secondaryEngines) {
            e.flushTlb();
            e.flushTranslationCache();
        }
    }

    /** Reads what {@link #saveState} wrote (before the parts restore: they schedule on the clock). */
    public void restoreState(DataInput in) throws IOException {
        checkSnapshotPoint();
        clock.restoreState(in);
        long bp = in.readLong();
        pendingStop = bp == -1 ? null : new StopReason.Breakpoint(bp);
        restoreArchState(in);
        if (vcpus.length > 1) {
            int n = in.readInt();
            if (n != vcpus.length) throw new IOException("the machine state is of " + n + " vCPUs, this machine has " + vcpus.length);
            int cur = in.readInt(), last = in.readInt();
            long left = in.readLong(), sw = in.readLong();
            long seed = in.readLong(), quantum = in.readLong(), position = in.readLong();
            if (cur < 0 || cur >= n || last < -1 || last >= n || left < 0 || sw < 0 || quantum < 0) throw new IOException("vCPU run state out of range");
            CpuState[] states = CpuState.values();
            CpuState[] got = new CpuState[n];
            for (int i = 0; i < n; i++) {
                int st = in.readUnsignedByte();
                if (st >= states.length) throw new IOException("vCPU run state out of range");
                got[i] = states[st];
            }
            int bpCpu = in.readInt();
            if ((bp == -1) != (bpCpu == -1) || bpCpu >= n) throw new IOException("breakpoint vCPU out of range");
            Schedule saved = quantum > 0 ? Schedule.roundRobin(quantum) : Schedule.of(seed);
            if (saved.seed() != seed) throw new IOException("schedule state out of range");
            for (int i = 0; i < n; i++) vcpus[i].state = got[i];
            schedule = saved.at(position);
            quantumLeft = left;
            switches = sw;
            lastRan = last;
            select(cur);
            if (bp != -1) pendingStop = new StopReason.Breakpoint(bp, bpCpu);
        }
        flushTranslations();
    }

    /** The arch machine's own state (pending interrupt latches, counters). */
    protected abstract void saveArchState(DataOutput out) throws IOException;

    protected abstract void restoreArchState(DataInput in) throws IOException;

    // ------------------------------------------------------------------ run loop

    /** Runs until a stop reason or {@code maxInstructions} executed instructions. */
    public StopReason run(long maxInstructions) {
        if (closed) throw new IllegalStateException("machine closed");
        if (vcpus.length > 1) return runCpus(maxInstructions);
        long remaining = maxInstructions;
        if (pendingStop instanceof StopReason.Breakpoint b && b.address() == pc()) icount.skipBreakOnce(b.address());
        pendingStop = null;
        while (true) {
            clock.fireDue();
            if (trapHandler != null) trapHandler.onSafePoint(this);
            if (!interruptsHeld) beforeSlice();
            if (pendingStop == null && stopFromOtherThread != null) pendingStop = stopFromOtherThread;
            if (pendingStop != null) return takeStop();
            if (remaining <= 0) return new StopReason.BudgetExhausted();
            long n = Math.min(Math.min(remaining, nextSliceLength()), Math.max(1, clock.instructionsUntilNextEvent()));
            StopReason end = runSlice(n);
            remaining -= sliceRan;
            if (end == NEXT_SLICE) continue;
            if (end != null) return end;
            if (!icount.reachedDeadline()) {
                // The engine returned on its own: an idle instruction (HLT/WFI) ended the run.
                StopReason idle = afterIdleExit();
                if (idle != null) return idle;
            }
        }
    }

    /**
     * {@link #run} with several vCPUs: each slice runs the current vCPU up to the end of its quantum
     * (or the budget, the slice length, the next clock event), then the {@link Schedule} picks the
     * next vCPU among those {@link CpuState#RUNNING} and its quantum. Between slices, as with one
     * vCPU: due events fire, the trap handler's safe point, the current vCPU's pending interrupts
     * ({@link #beforeSlice}); then every halted vCPU that can go on is made running again. A vCPU
     * whose engine returned on HLT/WFI and cannot go on at once is halted for the rest of its
     * quantum; when none can run the clock idles to the next event, or the run ends
     * {@link StopReason.Halted} (the current vCPU's PC) when no event is left or no halted vCPU can
     * be woken. A switch to another vCPU first lets the outgoing one be {@link #descheduled}. The
     * current vCPU and what is left of its quantum carry over to the next {@link #run}, so a stop
     * (a breakpoint: the current vCPU is the one that reached it) changes no interleaving.
     */
    private StopReason runCpus(long maxInstructions) {
        long remaining = maxInstructions;
        if (pendingStop instanceof StopReason.Breakpoint b && b.address() == pc()) icount.skipBreakOnce(b.address());
        pendingStop = null;
        boolean[] runnable = new boolean[vcpus.length];
        while (true) {
            clock.fireDue();
            if (trapHandler != null) trapHandler.onSafePoint(this);
            wakeHaltedCpus();
            if (pendingStop == null && stopFromOtherThread != null) pendingStop = stopFromOtherThread;
            if (pendingStop != null) return takeStop();
            if (remaining <= 0) return new StopReason.BudgetExhausted();
            if (quantumLeft <= 0 || vcpus[current].state != CpuState.RUNNING) {
                if (runnable.length != vcpus.length) runnable = new boolean[vcpus.length];
                for (int i = 0; i < vcpus.length; i++) runnable[i] = vcpus[i].state == CpuState.RUNNING;
                int next = schedule.next(runnable, lastRan);
                if (next < 0) {
                    // nothing can run: idle to the next event if that can wake anyone
                    if (!anyHaltedMayWake() || !clock.idleToNextEvent()) return new StopReason.Halted(pc());
                    continue;
                }
                if (lastRan >= 0 && next != lastRan) descheduled(lastRan);
                if (next != lastRan) switches++;
                select(next);
                quantumLeft = schedule.nextQuantum();
                if (switchObserver != null && next != lastRan) switchObserver.switchedTo(next, pc(), quantumLeft);
                lastRan = next;
            }
            if (!interruptsHeld) beforeSlice();
            if (pendingStop != null) return takeStop();
            // A quantum ends at the first block boundary at or after its length: a slice stops before
            // the block that would pass it, and the next slice of the same quantum runs that block
            // (a slice's first block always runs). So the quantum ends at the same instruction however
            // its slices were cut (budget, events, stops): a run in chunks interleaves as one run does.
            long n = Math.min(Math.min(Math.min(remaining, quantumLeft), nextSliceLength()), Math.max(1, clock.instructionsUntilNextEvent()));
            StopReason end = runSlice(n);
            remaining -= sliceRan;
            quantumLeft -= sliceRan;
            if (end == NEXT_SLICE) continue;
            if (end != null) return end;
            if (!icount.reachedDeadline() && vcpus[current].state == CpuState.RUNNING && stoppedAtIdleInstruction() && !idleEnds()) {
                vcpus[current].state = CpuState.HALTED;
                quantumLeft = 0;
            }
        }
    }

    /** {@link #runSlice}'s answer "start the next iteration of the loop at once". */
    private static final StopReason NEXT_SLICE = new StopReason.BudgetExhausted();
    /** The instructions the last {@link #runSlice} ran (the clock has advanced by them). */
    private long sliceRan;

    /**
     * One slice of the current vCPU, both run loops' common part: runs at most {@code n}
     * instructions (fewer at a host breakpoint it stands on), advances the clock by what ran
     * ({@link #sliceRan}), then takes a rewrite of guarded text and a host breakpoint reached.
     * Returns null when the loop goes on to its own end-of-slice checks (an idle instruction),
     * {@link #NEXT_SLICE} when it goes on to its next iteration at once (an engine error the arch
     * took, guarded text adopted, a breakpoint action that goes on), or the reason to return.
     */
    /** The exit of the split slice running now (an instruction breakpoint's address), 0: none. */
    private long splitting;

    /**
     * For an arch whose engine turns the exit of a split slice into an exception (arm64 at EL0:
     * Unicorn stops at an exit as at a WFI, which EL0 traps when SCTLR_EL1.nTWI is clear, with the
     * PC one instruction back): true when the exception at {@code pc} is that exit's, {@code
     * insnBefore} bytes before it; the PC is then put on the exit and the slice ends there, as an
     * exit's stop does.
     */
    protected boolean splitExitTrapped(long pc, int insnBefore) {
        if (splitting == 0 || pc + insnBefore != splitting) return false;
        setPc(splitting);
        uc.stop();
        return true;
    }
    private StopReason runSlice(long n) {
        long before = icount.executed();
        long split = icount.takeSplit();
        boolean atBreak = icount.stopsBefore(pc());
        icount.arm(split != 0 ? 1 : n);
        icount.setTimeStampCounter(clock.ticks());
        icount.setLiveTime(clock.instructions(), clock.idleNanos());
        sliceStart = before;
        inSlice = true;
        ran = true;
        try {
            // a split slice stops at its mid: Unicorn ends the block before its exit
            splitting = split;
            if (!atBreak) uc.start(pc(), split != 0 ? split : NEVER_EXECUTED, 0, 0);
            drainRecordedHits();
        } catch (HookFailedException e) {
            drainRecordedHits();
            inSlice = false;
            sliceRan = icount.executed() - before;
            clock.advance(sliceRan);
            throw e;
        } catch (UnicornException e) {
            drainRecordedHits();
            inSlice = false;
            sliceRan = icount.executed() - before;
            clock.advance(sliceRan);
            StopReason r = onEngineError(e);
            return r != null ? r : NEXT_SLICE;
        } finally {
            inSlice = false;
            splitting = 0;
            icount.afterSlice(pc());
            watchpoints.flushHeldReads();      // a read held for a store of its instruction: the block is over
        }
        if (split != 0 && pc() == split) icount.unchargeExitStop();
        sliceRan = icount.executed() - before;
        clock.advance(sliceRan);
        boolean flushed = ownCodeFlush;
        if (flushed) {
            ownCodeFlush = false;
            uc.flushTranslationCache();
            icount.forgetBlocks();
        }
        if (textGuard != null) {
            int g = textGuard.takeHit();
            if (g >= 0) {
                // the guest rewrote guarded text that is about to run: the owner adopts it
                textGuard.settle(g);
                return pendingStop != null ? takeStop() : NEXT_SLICE;
            }
        }
        long hit = icount.takeBreakHit();
        if (hit == -1 && split != 0 && pc() == split && breakpoints.containsKey(split)) hit = split;   // the mid reached
        if (hit == -1) {
            long start = pc();
            if (icount.takeMidHit(start) != -1) {
                // the block at start holds a mid: the next slice runs it alone up to the mid. A break
                // at start was passed by resuming from it: resume again.
                if (breakpoints.containsKey(start)) icount.skipBreakOnce(start);
                return pendingStop != null ? takeStop() : NEXT_SLICE;
            }
        }
        if (hit != -1 && pendingStop == null) {
            BreakpointAction action = breakpoints.get(hit);
            if (action != null && action.hit(this, hit)) {
                if (pc() == hit && breakpoints.containsKey(hit)) icount.skipBreakOnce(hit);
                return NEXT_SLICE;
            }
            pendingStop = new StopReason.Breakpoint(hit, current);
        }
        if (pendingStop != null) return takeStop();
        return flushed ? NEXT_SLICE : null;
    }

    /** Makes every halted vCPU that can go on ({@link #idleEnds}) running again; the current vCPU stays current. */
    private void wakeHaltedCpus() {
        int was = current;
        for (int i = 0; i < vcpus.length; i++) {
            if (vcpus[i].state != CpuState.HALTED) continue;
            select(i);
            if (idleEnds()) vcpus[i].state = CpuState.RUNNING;
        }
        select(was);
    }

    /** True when a halted vCPU can still be woken by an interrupt to come. */
    private boolean anyHaltedMayWake() {
        int was = current;
        try {
            for (int i = 0; i < vcpus.length; i++) {
                if (vcpus[i].state != CpuState.HALTED) continue;
                select(i);
                if (mayWakeLater()) return true;
            }
            return false;
        } finally {
            select(was);
        }
    }

    private StopReason takeStop() {
        StopReason r = pendingStop;
        if (!(r instanceof StopReason.Breakpoint)) pendingStop = null;
        return r;
    }

    /** Arch hook before each slice: inject pending interrupts the CPU state allows. */
    protected abstract void beforeSlice();

    /**
     * Arch hook after the engine returned by itself (neither the deadline nor a host stop): the
     * guest executed an idle instruction (HLT/WFI). Idle the clock forward to the next event, or
     * return a stop reason when nothing can wake the guest.
     */
    protected abstract StopReason afterIdleExit();

    /** Arch hook for an engine error (unmapped fetch, invalid instruction...): deliver it or stop. */
    protected abstract StopReason onEngineError(UnicornException e);

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (probeHits != null && Boolean.getBoolean("kpemu.trace.exceptions.native")) {
            System.err.printf("[probe hits recorded natively: %d, their lines formatted natively: %d]%n", probeHits.recorded(), probeHits.linesFormatted());
        }
        for (Vcpu v : vcpus) v.engine.close();
        if (probeHits != null) probeHits.close();
        for (Unicorn e : secondaryEngines) e.close();
        memory.close();
        if (textGuard != null) textGuard.close();
        primaryClock.closeGranules();
        for (Vcpu v : vcpus) v.clock.closeMidGranules();
    }
}
