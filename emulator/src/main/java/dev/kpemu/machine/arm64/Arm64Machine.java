package dev.kpemu.machine.arm64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.BitSet;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.ContextRegisters;
import dev.kpemu.machine.InterruptController;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.MemoryRegion;
import dev.kpemu.machine.NativeProbeHits;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.TrapHandler;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.UnicornException;

/**
 * An arm64 machine: one Cortex-A57 vCPU running at EL1 (EL2/EL3 exist in the engine only so
 * that EL1 uses AArch64 tables and HVC reaches the host), RAM at {@link Arm64Layout#RAM_BASE}.
 *
 * <p>Unicorn never takes an exception to the guest's vector table: every synchronous exception
 * only calls the interrupt hook. This class performs the architectural exception entry to
 * VBAR_EL1 itself ({@link #takeException}) with the syndrome and fault address QEMU computed
 * (read from the context blob, see {@link ExceptionStateLayout}), and injects IRQs between
 * slices. BRK goes to the {@link TrapHandler} first; HVC/SMC go to the {@link HypercallHandler}
 * (PSCI by default) and never reach the guest.
 */
public final class Arm64Machine extends Machine {
    /** Nominal guest speed for the virtual clock (one instruction per nanosecond). */
    public static final long DEFAULT_INSTRUCTIONS_PER_SECOND = 1_000_000_000L;

    // QEMU exception numbers (target/arm/cpu.h) as reported to the interrupt hook.
    static final int EXCP_UDEF = 1, EXCP_SWI = 2, EXCP_PREFETCH_ABORT = 3, EXCP_DATA_ABORT = 4,
            EXCP_BKPT = 7, EXCP_HVC = 11, EXCP_SMC = 13;
    /** ESR_EL1's exception class of a trapped WFI/WFE. */
    private static final int EC_WFX = 0x01;

    /** Vector offsets inside VBAR_EL1 (ARM ARM D1.10.2). */
    public static final int VECTOR_SYNC = 0x000, VECTOR_IRQ = 0x080, VECTOR_FIQ = 0x100, VECTOR_SERROR = 0x180;
    private static final int FROM_CURRENT_SP0 = 0x000, FROM_CURRENT_SPX = 0x200, FROM_LOWER_A64 = 0x400;

    /** PSTATE bits as Unicorn's PSTATE register presents them (SPSR layout). */
    public static final long PSTATE_SP = 1, PSTATE_EL_MASK = 0xc, PSTATE_F = 1 << 6, PSTATE_I = 1 << 7,
            PSTATE_A = 1 << 8, PSTATE_D = 1 << 9;
    /** EL1h with D, A, I, F masked: the PSTATE after an exception entry and at reset. */
    public static final long PSTATE_EL1H_MASKED = 0x3c5;
    /** The WFI instruction word. */
    public static final int INSN_WFI = 0xd503_207f;

    /** The conduit behind HVC/SMC (firmware calls). Reads and writes registers through the machine. */
    @FunctionalInterface
    public interface HypercallHandler {
        /** {@code imm16} is the instruction's immediate; the PC is already after the instruction. */
        void onHypercall(Arm64Machine machine, int imm16, boolean smc);
    }

    private final ExceptionStateLayout layout;
    // The current vCPU's (Machine#cpu) per-engine objects, switched with it (selectArchCpu).
    private Unicorn.Context scratchContext;
    private BitSet irqLines;
    private HypercallHandler hypercalls = new Psci();
    private NativeSvc nativeSvc;
    private Unicorn.Context pcContext;
    private Cpu cpuState;
    private Cpu[] cpus;
    private long exceptionsTaken;
    private long irqsTaken;
    private final Arm64DebugRegisters debugRegisters = new Arm64DebugRegisters(this);

    /** One vCPU's engine objects: its context, its native SVC hook, its interrupt latch, its translation registers' batch. */
    private static final class Cpu {
        final Unicorn engine;
        final Unicorn.Context scratch;
        /** A context through the PC only: {@link #setPc} writes the PC through it. */
        final Unicorn.Context pcContext;
        final NativeSvc nativeSvc;
        final BitSet irqLines = new BitSet();
        Unicorn.RegisterBatch translationRegisters;
        /** The IC IVAU / IC IALLU(IS) hook ({@link #hookCacheMaintenance}). */
        InstructionCacheHook cacheMaintenance;
        /** A context for clearing the exclusive monitor at a switch ({@link ExclusiveMonitor}), made on first use. */
        Unicorn.Context monitorContext;
        MemorySegment monitorBlob;

        Cpu(Unicorn engine, Unicorn.Context scratch, Unicorn.Context pcContext, NativeSvc nativeSvc) {
            this.engine = engine;
            this.scratch = scratch;
            this.pcContext = pcContext;
            this.nativeSvc = nativeSvc;
        }

        void close() {
            scratch.close();
            pcContext.close();
            if (monitorContext != null) monitorContext.close();
            if (nativeSvc != null) nativeSvc.close();
        }
    }

    private Arm64Machine(Unicorn uc, long instructionsPerSecond) {
        super(uc, instructionsPerSecond);
        this.layout = ExceptionStateLayout.get();
        this.cpus = new Cpu[] {hookCpu(uc)};
        useCpu(cpus[0]);
        hookCacheMaintenance(0);
        recordProbeHits(0, cpus[0]);
    }

    /** The registers the native probe recorder copies from a saved context (X0 to X30, SP, PC), and where they lie in it. */
    static final ContextRegisters CONTEXT_REGISTERS = new ContextRegisters(Arm64Machine::openEngine, java.util.stream.IntStream.concat(
            java.util.stream.IntStream.rangeClosed(Arm64Reg.X0, Arm64Reg.X28),
            java.util.stream.IntStream.of(Arm64Reg.X29, Arm64Reg.X30, Arm64Reg.SP, Arm64Reg.PC)).toArray());

    /** vCPU {@code cpu}'s native hook records probe hits at BRKs (kpemu_arm64_probe_hits.c), when the library has the code. */
    private void recordProbeHits(int cpu, Cpu c) {
        NativeSvc svc = c.nativeSvc;
        if (svc == null || !NativeProbeHits.available("kpemu_arm64_record_hit")) return;
        var ring = new NativeProbeHits(executedCounter(cpu), svc.pcContextBlob(), layout.pcOffset(), Arm64Reg.PSTATE, -1,
                CONTEXT_REGISTERS::offsetOf, layout.pcOffset() + 8);
        svc.recordHits(ring);
        recordProbeHits(cpu, ring);
    }

    /** The guest's own watchpoint registers, emulated ({@link Arm64DebugRegisters}). */
    public Arm64DebugRegisters debugRegisters() { return debugRegisters; }

    /** A vCPU's engine set up as the machine needs: its context, the exception (native SVC) and undefined-instruction hooks. */
    private Cpu hookCpu(Unicorn e) {
        if (e.contextSize() != layout.contextSize()) {
            throw new IllegalStateException("context size " + e.contextSize() + " differs from the calibrated " + layout.contextSize());
        }
        Unicorn.Context scratch = e.contextAlloc();
        // svc from EL0: native (NativeSvc), which passes every other exception to onInterrupt
        NativeSvc svc = NativeSvc.available() ? new NativeSvc(e, layout, (u, intno) -> onInterrupt(intno)) : null;
        if (svc == null) e.hookInterrupt((u, intno) -> onInterrupt(intno));
        e.hookInvalidInstruction(u -> {
            onInterrupt(EXCP_UDEF);
            return true;
        });
        if (svc != null) forwardAborts(svc);
        return new Cpu(e, scratch, e.contextAllocPrefix(layout.pcOffset() + 8), svc);
    }

    private void useCpu(Cpu c) {
        cpuState = c;
        scratchContext = c.scratch;
        pcContext = c.pcContext;
        nativeSvc = c.nativeSvc;
        irqLines = c.irqLines;
        translationRegisters = c.translationRegisters;
    }

    /**
     * vCPU {@code cpu}'s engine gets what vCPU 0's has: exception entry to its own VBAR_EL1 (every
     * synchronous exception, IRQs from its own latch ({@link #setInterruptLine(int, int, boolean)})
     * or controller), SVC from EL0 natively, BRK to the trap handler, HVC/SMC to the machine's
     * hypercall handler, WFI; the engine is made as vCPU 0's ({@link #openEngine}: EL1 in AArch64)
     * and starts at EL1h with DAIF masked. Not set: the generic timer's system-register hooks, the
     * interrupt controller, the MPIDR and PSCI's power control (the board's: {@code Arm64Board} of N
     * PEs, through {@link #onCpuAdded} and {@link #setHypercallHandler}).
     */
    @Override protected void addArchCpu(int cpu, Unicorn engine) {
        Cpu c = hookCpu(engine);
        Cpu[] more = java.util.Arrays.copyOf(cpus, cpu + 1);
        more[cpu] = c;
        cpus = more;
        recordProbeHits(cpu, c);
        engine.regWrite(Arm64Reg.PSTATE, PSTATE_EL1H_MASKED);
        engine.sysRegWrite(3, 0, 4, 0, 0, engine.sysRegRead(3, 0, 4, 0, 0));     // rebuild hflags (setPstate)
        hookCacheMaintenance(cpu);
        for (Cpu o : cpus) o.cacheMaintenance.forwardLineInvalidations(true);
    }

    // ------------------------------------------------------------------ code written by one vCPU, seen by all

    /** Instruction-cache maintenance forwarded to the other vCPUs so far: IC IVAU, then IC IALLU(IS). */
    private long lineInvalidations, allInvalidations;

    /**
     * vCPU {@code cpu}'s engine reports its instruction-cache maintenance ({@link InstructionCacheHook}):
     * code the guest wrote reaches every engine the way Linux makes it visible. An engine keeps its
     * translations of code rewritten by another vCPU (docs/smp-notes.md fact b), and also of code its
     * own vCPU rewrote through another virtual alias of the page (Linux patches its text through the
     * linear map and the fixmap: "Code written through an alias"); the A57 model's CTR_EL0 has DIC
     * clear, so Linux follows every code change with DC CVAU + DSB + IC IVAU by address, or IC
     * IALLUIS. An IC IVAU drops the line in the vCPU's own engine (natively, an executable address
     * only: {@code kpemu_arm64_icache.c}) and in the others; an IC IALLU(IS) flushes the others at once and the vCPU's own
     * engine at the end of the slice (a flush while it runs translated code could leave it running
     * blocks chained to freed ones). Without several vCPUs only IC IALLU(IS) reaches Java.
     */
    private void hookCacheMaintenance(int cpu) {
        Cpu c = cpus[cpu];
        if (c.cacheMaintenance != null) return;
        long ctr = c.engine.sysRegRead(3, 3, 0, 0, 1);
        long line = 4L << (ctr & 0xf);                                   // CTR_EL0.IminLine: log2 of words
        c.cacheMaintenance = InstructionCacheHook.install(c.engine, line, (u, reg, acc) -> onCacheMaintenance(cpu, line, u, reg, acc));
    }

    /**
     * IC IVAU (op1 3, CRm 5, op2 1): the line holding the address is dropped in every other vCPU's
     * engine and clock ({@link Machine#dropCodeInOtherCpus}); a user (lower-half) address with the
     * MMU on is dropped everywhere else by a flush, since the other engines may be in another address
     * space. IC IALLUIS (op1 0, CRm 1, op2 0) and IC IALLU (op1 0, CRm 5, op2 0): every other
     * engine's translations flushed, the own engine's at the end of the slice. Always false: the
     * instruction then completes as usual.
     */
    private boolean onCacheMaintenance(int cpu, long line, Unicorn u, int reg, Unicorn.SysRegAccess acc) {
        if (acc.crn() != 7) return false;
        if (acc.op1() == 3 && acc.crm() == 5 && acc.op2() == 1) {
            if (cpus.length < 2) return false;
            long va = u.regRead(reg) & -line;
            lineInvalidations++;
            if (va >= 0 && (u.sysRegRead(3, 0, 1, 0, 0) & 1) != 0) flushCodeInOtherCpus(cpu);
            else dropCodeInOtherCpus(cpu, va, line);
        } else if (acc.op1() == 0 && acc.op2() == 0 && (acc.crm() == 1 || acc.crm() == 5)) {
            allInvalidations++;
            flushCodeInOtherCpus(cpu);
            flushOwnCodeAtSliceEnd();
        }
        return false;
    }

    /** How many vCPU engines have the cache-maintenance hook: every vCPU's. */
    public int cacheMaintenanceHooks() {
        int n = 0;
        for (Cpu c : cpus) if (c.cacheMaintenance != null) n++;
        return n;
    }

    /** IC IVAU instructions forwarded to the other vCPUs so far. */
    public long lineInvalidations() { return lineInvalidations; }

    /** IC IALLU / IC IALLUIS instructions forwarded to the other vCPUs so far. */
    public long allInvalidations() { return allInvalidations; }

    @Override protected void selectArchCpu(int cpu) { useCpu(cpus[cpu]); }

    /**
     * The outgoing vCPU's exclusive monitor is cleared (docs/smp-notes.md fact d): QEMU's STXR
     * compares values, so another vCPU's store of the value LDXR read would let it succeed. The
     * monitor's address word is set to -1 in a saved context of its engine, which is restored
     * ({@link ExclusiveMonitor}: the word's offset is calibrated; a save per switch, and a restore
     * when the monitor was armed).
     */
    @Override protected void descheduled(int cpu) {
        Cpu c = cpus[cpu];
        if (c.monitorContext == null) {
            c.monitorContext = c.engine.contextAlloc();
            c.monitorBlob = c.monitorContext.blob();
        }
        ExclusiveMonitor.clear(c.engine, c.monitorContext, c.monitorBlob);
    }

    @Override protected boolean stoppedAtIdleInstruction() { return isWfiAt(pc() - 4); }

    /** WFI ends on a pending interrupt even when PSTATE masks it. */
    @Override protected boolean idleEnds() { return irqPending(); }

    @Override protected boolean mayWakeLater() { return true; }

    /** Opens an arm64 engine the way this machine needs it: A57, EL1 tables in AArch64 format, HVC to the host. */
    static Unicorn openEngine() {
        Unicorn uc = Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM, Unicorn.CPU_ARM64_A57);
        try {
            machineEngine(uc);
            // Unicorn resets SCR_EL3.RW = 0, which makes EL1 walks use the AArch32 LPAE format.
            uc.sysRegWrite(3, 6, 1, 1, 0, 0x501);            // SCR_EL3 = RW | HCE | NS
            uc.sysRegWrite(3, 4, 1, 1, 0, 1L << 31);         // HCR_EL2.RW: EL1 is AArch64
            return uc;
        } catch (RuntimeException e) {
            uc.close();
            throw e;
        }
    }

    /** A machine with {@code ramBytes} of RAM at {@link Arm64Layout#RAM_BASE}, at EL1h with DAIF masked. */
    public static Arm64Machine create(long ramBytes) {
        return create(ramBytes, DEFAULT_INSTRUCTIONS_PER_SECOND);
    }

    public static Arm64Machine create(long ramBytes, long instructionsPerSecond) {
        if (ramBytes <= 0 || ramBytes > Arm64Layout.RAM_MAX_SIZE || (ramBytes & 0xfff) != 0) {
            throw new IllegalArgumentException("RAM size must be a positive page multiple up to " + (Arm64Layout.RAM_MAX_SIZE >> 30) + " GiB");
        }
        Unicorn uc = openEngine();
        Arm64Machine m;
        try {
            m = new Arm64Machine(uc, instructionsPerSecond);
        } catch (RuntimeException e) {
            uc.close();
            throw e;
        }
        try {
            m.memory.addRam(Arm64Layout.RAM_REGION, Arm64Layout.RAM_BASE, ramBytes);
            m.setPstate(PSTATE_EL1H_MASKED);
            m.setPc(Arm64Layout.RAM_BASE);
            return m;
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public Unicorn openEngineOfSameKind() { return openEngine(); }

    /**
     * vCPU 0's interrupt latch and the counters; with several vCPUs then every other vCPU's latch
     * and the instruction-cache maintenance counts. The exclusive monitors are words of each
     * vCPU's context, which the snapshot carries whole.
     */
    @Override protected void saveArchState(java.io.DataOutput out) throws java.io.IOException {
        writeLines(out, cpus[0].irqLines);
        out.writeLong(exceptionsTaken());
        out.writeLong(irqsTaken);
        if (cpus.length > 1) {
            for (int i = 1; i < cpus.length; i++) writeLines(out, cpus[i].irqLines);
            out.writeLong(lineInvalidations);
            out.writeLong(allInvalidations);
        }
    }

    @Override protected void restoreArchState(java.io.DataInput in) throws java.io.IOException {
        readLines(in, cpus[0].irqLines);
        exceptionsTaken = in.readLong();
        for (Cpu c : cpus) if (c.nativeSvc != null) c.nativeSvc.resetTaken();
        irqsTaken = in.readLong();
        if (cpus.length > 1) {
            for (int i = 1; i < cpus.length; i++) readLines(in, cpus[i].irqLines);
            lineInvalidations = in.readLong();
            allInvalidations = in.readLong();
        }
    }

    private static void writeLines(java.io.DataOutput out, BitSet irqLines) throws java.io.IOException {
        long[] lines = irqLines.toLongArray();
        out.writeInt(lines.length);
        for (long l : lines) out.writeLong(l);
    }

    private static void readLines(java.io.DataInput in, BitSet irqLines) throws java.io.IOException {
        int n = in.readInt();
        if (n < 0 || n > 64) throw new java.io.IOException("interrupt line state out of range");
        long[] lines = new long[n];
        for (int i = 0; i < n; i++) lines[i] = in.readLong();
        irqLines.clear();
        irqLines.or(BitSet.valueOf(lines));
    }

    @Override public long pc() { return uc.regRead(Arm64Reg.PC); }

    /**
     * Through a context that ends after the PC, not Unicorn's register write: that write, from a
     * hook while the engine runs, sets the engine's skip_sync_pc_on_exit, which only a block's
     * exit-request check clears; until then memory hooks are called without the pc synced to the
     * accessing instruction, and watchpoints reported the block's start
     * ({@code Arm64MachineTest.aWatchedStoreAfterAnSvcReportsItsOwnPc}). Between runs the two are the same.
     */
    @Override public void setPc(long pc) {
        uc.contextSave(pcContext);
        pcContext.blob().set(ValueLayout.JAVA_LONG_UNALIGNED, layout.pcOffset(), pc);
        uc.contextRestore(pcContext);
    }

    /** The live stack pointer (SP_EL0 or SP_EL1, whichever PSTATE selects). */
    @Override public long sp() { return uc.regRead(Arm64Reg.SP); }

    public long reg(int arm64Reg) { return uc.regRead(arm64Reg); }

    public void setReg(int arm64Reg, long value) { uc.regWrite(arm64Reg, value); }

    /** PSTATE in SPSR layout (NZCV, DAIF, EL, SP). Unicorn's register is 32 bits wide. */
    public long pstate() { return uc.regRead(Arm64Reg.PSTATE) & 0xffff_ffffL; }

    /**
     * Sets PSTATE and makes the engine honour it: writing PSTATE alone leaves Unicorn's cached
     * translation flags (current EL among them) stale, a CP-register write rebuilds them. The
     * live SP is not re-banked: when changing EL or SPSel, set SP yourself.
     */
    public void setPstate(long pstate) {
        uc.regWrite(Arm64Reg.PSTATE, pstate & 0xffff_ffffL);
        rebuildFlags();
    }

    public int currentEl() { return (int) (pstate() >>> 2) & 3; }

    private void rebuildFlags() {
        long spsr = uc.sysRegRead(3, 0, 4, 0, 0);
        uc.sysRegWrite(3, 0, 4, 0, 0, spsr);
    }

    public long sysReg(int op0, int op1, int crn, int crm, int op2) { return uc.sysRegRead(op0, op1, crn, crm, op2); }

    public void setSysReg(int op0, int op1, int crn, int crm, int op2, long value) { uc.sysRegWrite(op0, op1, crn, crm, op2, value); }

    @Override
    public void mapKernelPages(long va, long pa, long size, java.util.function.IntToLongFunction tablePages) {
        Arm64PageMapper.map(uc, memory(), va, pa, size, tablePages);
    }

    @Override
    public Arm64PageWalker pageTables() {
        if (translationRegisters == null) {
            // SCTLR_EL1, TCR_EL1, TTBR0_EL1, TTBR1_EL1 in one engine call (four, one at a time)
            translationRegisters = cpuState.translationRegisters = uc.registerBatch(new int[][] {{3, 0, 1, 0, 0}, {3, 0, 2, 0, 2}}, Arm64Reg.TTBR0_EL1, Arm64Reg.TTBR1_EL1);
        }
        long[] r = translationValues;
        translationRegisters.read(r);
        return new Arm64PageWalker(memory, r[0], r[1], r[2], r[3]);
    }

    private Unicorn.RegisterBatch translationRegisters;
    private final long[] translationValues = new long[4];

    /** Replaces the HVC/SMC handler (default: {@link Psci}). */
    public void setHypercallHandler(HypercallHandler h) { this.hypercalls = h == null ? new Psci() : h; }

    /** SVCs taken by the native hook since the last reset. */
    long nativeSvcsTaken() { return nativeSvc != null ? nativeSvc.taken() : 0; }

    /** Data and instruction aborts the current vCPU's native hook took (0 without it). */
    long nativeAbortsTaken() { return nativeSvc != null ? nativeSvc.abortsTaken() : 0; }

    /**
     * Which aborts must reach the Java hook, told to a vCPU's native hook. The consumers of an
     * abort on arm64 and what each must see: the trap handler ({@link #faultResolvedByHost}) per
     * its {@link dev.kpemu.machine.FaultInterest} (the kprobes engine: aborts whose PC is in its
     * slot area, every one while probed text waits to be synced; a handler without one: every
     * one). Taking an abort writes no guest memory (registers only), so guarded text and
     * watchpoints ({@code w:}, a memory hook on guest stores) see nothing of it; uprobes are host
     * breakpoints of the instruction clock (no guest exception); fault injection acts in probe
     * handlers; the exception trace is x86's.
     */
    private void forwardAborts(NativeSvc svc) {
        long[] pcs = trapHandlerPcs();
        svc.forwardAborts(trapHandlerSeesAllFaults(), pcs[0], pcs[1]);
    }

    @Override protected void faultConsumersChanged() {
        for (Cpu c : cpus) if (c.nativeSvc != null) forwardAborts(c.nativeSvc);
    }

    /** Native SVCs whose syndrome was read from a saved context (the SVC's bytes unreadable). */
    long svcSyndromesFromContext() { return nativeSvc != null ? nativeSvc.syndromesFromContext() : 0; }

    @Override public long faultsDeliveredNatively() {
        long n = 0;
        for (Cpu c : cpus) if (c.nativeSvc != null) n += c.nativeSvc.abortsTaken();
        return n;
    }

    /** Exceptions and interrupts delivered to the guest so far. */
    public long exceptionsTaken() {
        long n = exceptionsTaken;
        for (Cpu c : cpus) if (c.nativeSvc != null) n += c.nativeSvc.taken();
        return n;
    }

    // ------------------------------------------------------------------ interrupts

    /**
     * Slice length while an interrupt is signalled but PSTATE.I masks it, when the native clock
     * cannot watch for the unmask ({@link #canWatchInterruptEnable()} false, an old library). The
     * guest's unmask ({@code msr daifclr}, {@code msr daif}, {@code eret}) is no MRS/MSR register
     * access the host can hook; with the watch the slice ends at the first block that starts
     * unmasked (exact), without it short slices poll PSTATE. Short slices alone are not enough:
     * the idle loop unmasks for only a few instructions, and every WFI ends the slice right
     * after itself (still masked), so slice ends never land in that window: Linux's idle loop
     * then never takes its timer interrupt (seen: boots hang in do_idle). Booting Linux needs
     * the watch ({@code Arm64LinuxGuest} checks); this fallback serves bare-metal guests.
     */
    public static final long MASKED_PENDING_SLICE = 2_000;

    /**
     * Raises or lowers interrupt line {@code irq}: with a GIC, the GIC interrupt ID (PPIs 16-31,
     * SPIs from 32); without one, any raised line makes an IRQ pending. The IRQ is taken at the
     * next slice boundary when PSTATE.I is clear. Safe to call from MMIO callbacks and clock
     * events.
     */
    @Override
    public void setInterruptLine(int cpu, int irq, boolean level) {
        InterruptController ic = interruptController(cpu);
        if (ic != null) ic.setLine(irq, level);
        else cpus[cpu].irqLines.set(irq, level);
    }

    /** True when an IRQ is signalled to the CPU (PSTATE.I not considered). */
    public boolean irqPending() {
        InterruptController ic = interruptController();
        return ic != null ? ic.interruptAsserted() : !irqLines.isEmpty();
    }

    @Override
    protected void beforeSlice() {
        if (cpuState.nativeSvc != null) cpuState.nativeSvc.useRam(memory);
        Arm64DebugRegisters.Pending watch = debugRegisters.takePending(cpu());
        if (watch != null) {
            // the guest's own watchpoint (Arm64DebugRegisters): taken before the store, ELR = the storing instruction
            takeException(VECTOR_SYNC, watch.esr(), watch.far(), true);
        }
        boolean pending = irqPending();
        if (pending && (pstate() & PSTATE_I) == 0) {
            takeException(VECTOR_IRQ, -1, 0, false);
            irqsTaken++;
        }
        // An interrupt the guest masks: end the slice where the guest unmasks it.
        watchInterruptEnable(pending && (pstate() & PSTATE_I) != 0);
    }

    @Override
    protected long nextSliceLength() {
        long s = super.nextSliceLength();
        return irqPending() && !canWatchInterruptEnable() ? Math.min(s, MASKED_PENDING_SLICE) : s;
    }

    /** IRQ exceptions taken so far. */
    public long irqsTaken() { return irqsTaken; }

    /**
     * Unicorn 2.1.1 ends {@code uc_emu_start} without an error right after a WFI, PC on the next
     * instruction (the next start resumes normally; WFE, YIELD and SEV are NOPs). The run loop
     * calls this only when the engine returned by itself, and the word before the PC confirms
     * the WFI.
     * WFI completes when an interrupt line is raised (even with PSTATE.I set); until then the
     * clock idles from event to event. {@link StopReason.Halted} carries the PC after the WFI;
     * running again resumes there.
     */
    @Override
    protected StopReason afterIdleExit() {
        long pc = pc();
        if (!isWfiAt(pc - 4)) return null;
        // WFI wakes on a pending interrupt even when PSTATE masks it.
        while (!irqPending() && !stopPending()) {   // an event may stop the machine (the host's time limit)
            if (!clock.idleToNextEvent()) return new StopReason.Halted(pc);
        }
        return null;
    }

    private boolean isWfiAt(long va) {
        try {
            PageTableWalker.Translation t = pageTables().translate(va);
            if (t == null) return false;
            MemoryRegion r = memory.regionAt(t.physical());
            return r != null && r.kind() == MemoryRegion.Kind.RAM && memory.readInt(t.physical()) == INSN_WFI;
        } catch (UnicornException e) {
            return false;
        }
    }

    @Override
    protected StopReason onEngineError(UnicornException e) {
        return new StopReason.GuestError(e.getMessage(), pc());
    }

    // ------------------------------------------------------------------ synchronous exceptions

    /** Exceptions that reached the Java hook, by Unicorn's exception number (printed at close with {@code -Dkpemu.trace.exceptions.native=true}). */
    private final long[] javaExceptions = new long[16];
    private static final boolean COUNT_JAVA = Boolean.getBoolean("kpemu.trace.exceptions.native");

    private void onInterrupt(int intno) {
        javaExceptions[intno & 15]++;
        if (intno == EXCP_BKPT) {
            onBreakpoint();
            return;
        }
        uc.contextSave(scratchContext);
        int syndrome = layout.syndrome(scratchContext.blob());
        long vaddress = layout.vaddress(scratchContext.blob());
        switch (intno) {
            case EXCP_HVC, EXCP_SMC -> hypercalls.onHypercall(this, syndrome & 0xffff, intno == EXCP_SMC);
            case EXCP_DATA_ABORT, EXCP_PREFETCH_ABORT -> {
                if (faultResolvedByHost(pc(), syndrome >>> 26)) return;
                takeException(VECTOR_SYNC, Integer.toUnsignedLong(syndrome), vaddress, true);
            }
            default -> {
                if (intno == EXCP_UDEF && syndrome >>> 26 == EC_WFX && splitExitTrapped(pc(), 4)) return;
                if (intno != EXCP_SWI && faultResolvedByHost(pc(), syndrome >>> 26)) return;
                takeException(VECTOR_SYNC, Integer.toUnsignedLong(syndrome), 0, false);
            }
        }
    }

    /**
     * BRK: to the trap handler first. The syndrome (the immediate, and ESR when the guest takes
     * it) lives in the saved context, so the context is copied only when the handler reads the
     * immediate or the guest takes the exception; the kprobes engine's own traps cost no copy.
     */
    private void onBreakpoint() {
        long pc = pc();
        TrapHandler th = trapHandler();
        if (th != null && !th.usesBreakpointImmediate() && th.onBreakpoint(this, pc, -1)) return;
        uc.contextSave(scratchContext);
        int syndrome = layout.syndrome(scratchContext.blob());
        if (th != null && th.usesBreakpointImmediate() && th.onBreakpoint(this, pc, syndrome & 0xffff)) return;
        takeException(VECTOR_SYNC, Integer.toUnsignedLong(syndrome), 0, false);
    }

    /**
     * Takes an exception to EL1 as the architecture does (ARM ARM D1.10): ELR_EL1 = the current
     * PC (Unicorn leaves it on the preferred return address: at the instruction for aborts, BRK
     * and UNDEF, after it for SVC), SPSR_EL1 = PSTATE, PSTATE = EL1h with DAIF masked, the live
     * SP banked, ESR_EL1 (when {@code esr >= 0}) and FAR_EL1 (when {@code setFar}) written, PC =
     * VBAR_EL1 + the vector for the source EL/SP and {@code type}. Usable from hooks and between
     * runs. Stops the machine with {@link StopReason.GuestError} when the vector is not mapped
     * or faults itself (the guest has no handler yet).
     */
    public void takeException(int type, long esr, long far, boolean setFar) {
        long pstate = pstate();
        long pc = pc();
        int el = (int) (pstate >>> 2) & 3;
        boolean spx = (pstate & PSTATE_SP) != 0;
        if (el > 1) {
            requestStop(new StopReason.GuestError("exception at EL" + el + " is not supported", pc));
            return;
        }
        long vbar = uc.regRead(Arm64Reg.VBAR_EL1);
        long vector = vbar + (el == 0 ? FROM_LOWER_A64 : spx ? FROM_CURRENT_SPX : FROM_CURRENT_SP0) + type;
        if (!vectorUsable(vector) || (pc == vector && type == VECTOR_SYNC)) {
            requestStop(new StopReason.GuestError(String.format("no usable exception vector at 0x%x (VBAR_EL1 0x%x) for %s ESR 0x%x FAR 0x%x",
                    vector, vbar, type == VECTOR_SYNC ? "synchronous exception" : "interrupt", esr, far), pc));
            return;
        }
        if (type == VECTOR_SYNC && nativeSvc != null) {
            if (el == 0) nativeSvc.verified(vbar);
            else if (spx) nativeSvc.verifiedCurrent(vbar);
        }
        long sp = uc.regRead(Arm64Reg.SP);
        uc.regWrite(el == 1 && spx ? Arm64Reg.SP_EL1 : Arm64Reg.SP_EL0, sp);
        long newSp = uc.regRead(Arm64Reg.SP_EL1);
        uc.regWrite(Arm64Reg.ELR_EL1, pc);
        uc.regWrite(Arm64Reg.PSTATE, PSTATE_EL1H_MASKED);
        uc.regWrite(Arm64Reg.SP, newSp);
        if (setFar) uc.regWrite(Arm64Reg.FAR_EL1, far);
        if (esr >= 0) uc.sysRegWrite(3, 0, 5, 2, 0, esr);           // ESR_EL1
        uc.sysRegWrite(3, 0, 4, 0, 0, pstate);                      // SPSR_EL1; the CP write rebuilds hflags
        setPc(vector);
        exceptionsTaken++;
    }

    private boolean vectorUsable(long vector) {
        PageTableWalker.Translation t = pageTables().translate(vector);
        if (t == null) return false;
        MemoryRegion r = memory.regionAt(t.physical());
        return r != null && r.kind() == MemoryRegion.Kind.RAM;
    }

    @Override
    public void close() {
        if (COUNT_JAVA) {
            StringBuilder b = new StringBuilder("[exceptions through the Java hook by Unicorn number:");
            for (int i = 0; i < javaExceptions.length; i++) if (javaExceptions[i] != 0) b.append(' ').append(i).append('=').append(javaExceptions[i]);
            for (Cpu c : cpus) if (c.nativeSvc != null) b.append(" taken natively=").append(c.nativeSvc.taken()).append(" (aborts ").append(c.nativeSvc.abortsTaken()).append(')');
            System.err.println(b.append(']'));
        }
        for (Cpu c : cpus) c.close();
        super.close();
    }
}
