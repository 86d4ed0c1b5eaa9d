package dev.kpemu.machine.x86;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.ContextRegisters;
import dev.kpemu.machine.InterruptController;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.NativeProbeHits;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.UnicornException;
import dev.kpemu.unicorn.X86Reg;

/**
 * An x86-64 machine. Unicorn only reports exceptions to a hook; this class does what the CPU
 * would: it delivers them through the guest's IDT (64-bit gates, IST and privilege stacks, the
 * architecture's error codes, CR2), runs {@code syscall} through MSR_LSTAR, injects external
 * interrupts when RFLAGS.IF allows, and idles on HLT. {@code syscall} is done natively
 * ({@link NativeSyscall}) when kpemu's native library has the hook, and so are the common faults
 * (#PF, #GP and the others {@link NativeExceptions} lists) while no consumer must see them.
 */
public final class X86Machine extends Machine {
    public static final int VEC_DE = 0, VEC_DB = 1, VEC_NMI = 2, VEC_BP = 3, VEC_UD = 6, VEC_DF = 8,
            VEC_TS = 10, VEC_NP = 11, VEC_SS = 12, VEC_GP = 13, VEC_PF = 14, VEC_AC = 17;

    public static final int MSR_EFER = 0xc000_0080, MSR_STAR = 0xc000_0081, MSR_LSTAR = 0xc000_0082,
            MSR_FMASK = 0xc000_0084, MSR_GS_BASE = 0xc000_0101, MSR_KERNEL_GS_BASE = 0xc000_0102;

    static final long RFLAGS_TF = 1 << 8, RFLAGS_IF = 1 << 9, RFLAGS_NT = 1 << 14, RFLAGS_RF = 1 << 16, RFLAGS_VM = 1 << 17;

    // The current vCPU's (Machine#cpu) per-engine objects, switched with it (selectArchCpu).
    private X86PageWalker walker;
    private final X86ContextLayout layout = X86ContextLayout.get();
    private Unicorn.Context scratchContext;
    private MemorySegment contextBlob;
    /** A context that saves and restores only the CPU state up to RIP, hflags and the CS/SS caches ({@link X86ContextLayout#privilegeEnd}). */
    private Unicorn.Context privilegeContext;
    private MemorySegment privilegeBlob;
    /** The current vCPU's own state. */
    private Cpu cpuState;
    private Cpu[] cpus;
    /** True while Unicorn runs the interrupt or invalid-instruction hook ({@link #setPc}). */
    private boolean inExceptionHook;
    private long exceptionsDelivered;
    private static final boolean TRACE = Boolean.getBoolean("kpemu.trace.exceptions");
    /** Prints the native exception hook's counts when the machine closes, without tracing (which sends every exception to Java). */
    private static final boolean COUNT_NATIVE = Boolean.getBoolean("kpemu.trace.exceptions.native");
    private long traceBudget = Long.getLong("kpemu.trace.exceptions.max", 200);
    private long externalInterrupts;
    /** The guest's DR0–DR3/DR7, emulated on the machine's watchpoints. */
    private final X86DebugRegisters debugRegisters = new X86DebugRegisters(this);
    private NativeSyscall nativeSyscall;

    /**
     * One vCPU's engine objects and state: page walker, contexts, the native {@code syscall} hook,
     * its interrupt latch (no controller) and its NMI input.
     */
    private static final class Cpu {
        final X86PageWalker walker;
        final Unicorn.Context scratch, privilege;
        /** Their blobs (each {@code blob()} call asks the engine its context size). */
        final MemorySegment scratchBlob, privilegeBlob;
        final NativeSyscall nativeSyscall;
        final NativeCmpxchg16b cmpxchg16b;
        /** The native interrupt hook (null: the Java hook is the engine's interrupt hook). */
        final NativeExceptions exceptions;
        int pendingVector = -1;
        NmiSource nmiSource;

        Cpu(X86PageWalker walker, Unicorn.Context scratch, Unicorn.Context privilege, NativeSyscall nativeSyscall,
                NativeCmpxchg16b cmpxchg16b, NativeExceptions exceptions) {
            this.cmpxchg16b = cmpxchg16b;
            this.exceptions = exceptions;
            this.walker = walker;
            this.scratch = scratch;
            this.privilege = privilege;
            this.scratchBlob = scratch.blob();
            this.privilegeBlob = privilege.blob();
            this.nativeSyscall = nativeSyscall;
        }

        void close() {
            scratch.close();
            privilege.close();
            if (nativeSyscall != null) nativeSyscall.close();
            if (exceptions != null) {
                if (TRACE || COUNT_NATIVE) System.err.printf("[exceptions delivered natively: %d, passed to Java: %d]%n", exceptions.delivered(), exceptions.forwarded());
                exceptions.close();
            }
            if (cmpxchg16b != null) {
                if (TRACE) System.err.printf("[cmpxchg16b executed natively: %d]%n", cmpxchg16b.handled());
                cmpxchg16b.close();
            }
        }
    }

    private X86Machine(Unicorn uc, long instructionsPerSecond) {
        super(uc, instructionsPerSecond);
        this.cpus = new Cpu[] {hookCpu(uc)};
        useCpu(cpus[0]);
        recordProbeHits(0, cpus[0]);
        // rdtsc/rdtscp would read the host's TSC: answered from the virtual clock instead, so two
        // runs of the same guest see the same values (native hooks, Unicorn 2.1.4+).
        useVirtualTimeStampCounter();
    }

    /** A vCPU's engine set up as the machine needs: its contexts, exits, exception, #UD and syscall hooks. */
    private Cpu hookCpu(Unicorn e) {
        Unicorn.Context scratch = e.contextAlloc();
        Unicorn.Context privilege = e.contextAllocPrefix(layout.privilegeEnd());
        // uc_emu_start's `until` is ignored from now on (see Unicorn.useExits): with guest paging,
        // 2.1.1's invalidation of the block at until-1 on every return walks an address the guest
        // may not map, which sets CR2 and the exception-in-flight state behind the guest's back.
        e.useExits(true);
        // faults natively (NativeExceptions), the Java hook for everything else; a library without it: Java
        NativeExceptions nx = NativeExceptions.available() ? new NativeExceptions(e, layout, (u, intno) -> onInterruptHook(intno)) : null;
        if (nx == null) e.hookInterrupt((u, intno) -> onInterruptHook(intno));
        else forwardFaults(nx);
        // cmpxchg16b first, natively (added before the Java hook: Unicorn runs them in order
        // until one handles the #UD); its operand's faults come to the Java hook below
        NativeCmpxchg16b cx16 = NativeCmpxchg16b.available() ? new NativeCmpxchg16b(e, layout) : null;
        e.hookInvalidInstruction(u -> {
            // Every #UD arrives here (Unicorn 2.1.4 calls no interrupt hook for it): "handled"
            // resumes at whatever RIP the hook leaves, so the hook emulates or delivers it.
            inExceptionHook(() -> {
                long rip = pc();
                NativeCmpxchg16b.Fault f = cx16 == null ? null : cx16.takeFault();
                if (f == null) {
                    if (!faultResolvedByHost(rip, VEC_UD)) deliver(VEC_UD, rip, null);
                    return;
                }
                if (f.vector() == VEC_PF) uc.regWrite(X86Reg.CR2, f.address());
                if (!faultResolvedByHost(rip, f.vector())) deliver(f.vector(), rip, f.errorCode());
            });
            return true;
        });
        // syscall: native (NativeSyscall), the Java hook only for #UD; a library without it: Java
        NativeSyscall ns = NativeSyscall.available() ? new NativeSyscall(e, layout, u -> inExceptionHook(this::onSyscall)) : null;
        if (ns == null) e.hookSyscall(u -> inExceptionHook(this::onSyscall));
        return new Cpu(new X86PageWalker(e, memory), scratch, privilege, ns, cx16, nx);
    }

    /** The registers the native probe recorder copies from a saved context (RAX to R15, RIP), and where they lie in it. */
    static final ContextRegisters CONTEXT_REGISTERS = new ContextRegisters(X86Machine::openEngine, X86Reg.RAX, X86Reg.RBX, X86Reg.RCX,
            X86Reg.RDX, X86Reg.RSI, X86Reg.RDI, X86Reg.RBP, X86Reg.RSP, X86Reg.R8, X86Reg.R9, X86Reg.R10, X86Reg.R11, X86Reg.R12,
            X86Reg.R13, X86Reg.R14, X86Reg.R15, X86Reg.RIP);

    /** vCPU {@code cpu}'s native hook records probe hits at int3s (kpemu_x86_probe_hits.c), when the library has the code. */
    private void recordProbeHits(int cpu, Cpu c) {
        if (c.exceptions == null || !NativeProbeHits.available("kpemu_x86_record_hit")) return;
        var ring = new NativeProbeHits(executedCounter(cpu), c.privilegeBlob, layout.eip(), X86Reg.CS, X86Reg.GS_BASE,
                CONTEXT_REGISTERS::offsetOf, layout.privilegeEnd());
        c.exceptions.recordHits(ring);
        recordProbeHits(cpu, ring);
    }

    private void useCpu(Cpu c) {
        cpuState = c;
        walker = c.walker;
        scratchContext = c.scratch;
        contextBlob = c.scratchBlob;
        privilegeContext = c.privilege;
        privilegeBlob = c.privilegeBlob;
        nativeSyscall = c.nativeSyscall;
    }

    /**
     * vCPU {@code cpu}'s engine gets what vCPU 0's has: exception and interrupt delivery through
     * its own IDT, #UD, {@code syscall}, HLT, its own interrupt latch ({@link #setInterruptLine(int, int, boolean)})
     * or controller and NMI input, the virtual TSC (the machine's). Not set: the CPU's mode (the
     * engine's 64-bit reset state until someone sets one: {@link X86LongMode#enter} on
     * {@code engine(cpu)} before {@link #startCpu}, or the architectural INIT state in real mode by
     * {@link #startAtSipi}, what the board's local APIC does on a STARTUP IPI), CPUID (the board's,
     * {@link #onCpuAdded}).
     */
    @Override protected void addArchCpu(int cpu, Unicorn engine) {
        Cpu[] more = java.util.Arrays.copyOf(cpus, cpu + 1);
        more[cpu] = hookCpu(engine);
        cpus = more;
        recordProbeHits(cpu, more[cpu]);
    }

    @Override protected void selectArchCpu(int cpu) { useCpu(cpus[cpu]); }

    // QEMU's hflags bits the real-mode reset state clears or sets (target/i386/cpu.h)
    static final int HF_CS32 = 1 << 4, HF_SS32 = 1 << 5, HF_ADDSEG = 1 << 6, HF_PE = 1 << 7, HF_LMA = 1 << 14, HF_CS64 = 1 << 15,
            HF_OSFXSR = 1 << 22;
    /** Real-mode segment-cache flags of QEMU's reset state: code (present, S, code, readable, accessed) and data (present, S, writable, accessed). */
    static final int SEG_FLAGS_REAL_CODE = (1 << 15) | (1 << 12) | (1 << 11) | (1 << 9) | (1 << 8),  // DESC_P S CS R A
            SEG_FLAGS_REAL_DATA = (1 << 15) | (1 << 12) | (1 << 9) | (1 << 8);                        // DESC_P S W A
    /** CR0 after RESET/INIT: ET, CD, NW (SDM table 9-1). */
    static final long CR0_RESET = 0x6000_0010L;

    /**
     * Starts vCPU {@code cpu} as a STARTUP IPI with {@code vector} starts an AP waiting for one
     * (QEMU's {@code do_cpu_sipi} after {@code do_cpu_init}): the architectural INIT state (SDM
     * table 9-1: real mode, CR0 = 0x60000010, CR3 = CR4 = EFER = 0, RFLAGS = 2, the general
     * registers zero, GDTR and IDTR base 0 limit 0xffff, data segments selector 0 base 0 limit
     * 0xffff), then CS = {@code vector << 8} with base {@code vector << 12} and IP = 0, and the vCPU
     * runs from the next time the schedule picks it ({@link #startCpu}). The guest's own code (Linux's
     * real-mode trampoline) takes it to protected and long mode.
     *
     * <p>How, on an engine opened in 64-bit mode: Unicorn's x86-64 engine runs whatever mode its CPU
     * state says (the translator reads hflags and the CS cache, never the engine's mode; a 64-bit
     * engine's RESET only starts it in long mode), but in 64-bit mode its register API writes only
     * the selectors of CS, SS, DS and ES, not their caches. So CR0, CR3, CR4, EFER, the flags and
     * descriptor tables go through the register API and the segment caches, hflags (PE, CS32, SS32,
     * CS64, LMA, CPL cleared, ADDSEG set: QEMU's real mode) and RIP through a saved context at the
     * calibrated offsets ({@link X86ContextLayout}; ES, DS, FS, GS sit next to CS and SS as QEMU's
     * {@code segs[]} orders them: ES, CS, SS, DS, FS, GS). Between runs or from a clock event (not
     * while {@code cpu} runs).
     */
    public void startAtSipi(int cpu, int vector) {
        if (vector < 0 || vector > 0xff) throw new IllegalArgumentException("SIPI vector " + vector);
        if (layout.ssCache() - layout.csCache() != X86ContextLayout.SEG_CACHE_SIZE) {
            throw new IllegalStateException("Unicorn's context does not hold SS right after CS (calibrated CS at "
                    + layout.csCache() + ", SS at " + layout.ssCache() + "): cannot write the real-mode segments");
        }
        Unicorn e = engine(cpu);
        Cpu c = cpus[cpu];
        e.regWrite(X86Reg.CR0, CR0_RESET);
        e.regWrite(X86Reg.CR4, 0);
        e.regWrite(X86Reg.CR3, 0);
        e.msrWrite(MSR_EFER, 0);
        for (int r : new int[] {X86Reg.RAX, X86Reg.RBX, X86Reg.RCX, X86Reg.RDX, X86Reg.RSI, X86Reg.RDI, X86Reg.RBP, X86Reg.RSP,
                X86Reg.R8, X86Reg.R9, X86Reg.R10, X86Reg.R11, X86Reg.R12, X86Reg.R13, X86Reg.R14, X86Reg.R15}) {
            e.regWrite(r, 0);
        }
        e.regWrite(X86Reg.RFLAGS, 2);
        e.mmrWrite(X86Reg.GDTR, new Unicorn.X86Mmr(0, 0, 0xffff, 0));
        e.mmrWrite(X86Reg.IDTR, new Unicorn.X86Mmr(0, 0, 0xffff, 0));
        e.contextSave(c.scratch);
        MemorySegment b = c.scratchBlob;
        long es = layout.csCache() - X86ContextLayout.SEG_CACHE_SIZE;
        for (int seg = 0; seg < 6; seg++) {
            long at = es + (long) seg * X86ContextLayout.SEG_CACHE_SIZE;
            boolean code = seg == 1;
            b.set(ValueLayout.JAVA_INT_UNALIGNED, at + X86ContextLayout.SEG_SELECTOR, code ? vector << 8 : 0);
            b.set(ValueLayout.JAVA_LONG_UNALIGNED, at + X86ContextLayout.SEG_BASE, code ? (long) vector << 12 : 0);
            b.set(ValueLayout.JAVA_INT_UNALIGNED, at + X86ContextLayout.SEG_LIMIT, 0xffff);
            b.set(ValueLayout.JAVA_INT_UNALIGNED, at + X86ContextLayout.SEG_FLAGS, code ? SEG_FLAGS_REAL_CODE : SEG_FLAGS_REAL_DATA);
        }
        int hf = b.get(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags());
        hf &= ~(X86ContextLayout.HF_CPL_MASK | X86ContextLayout.HF_INHIBIT_IRQ_MASK | HF_CS32 | HF_SS32 | HF_PE | HF_LMA | HF_CS64 | HF_OSFXSR);
        hf |= HF_ADDSEG;
        b.set(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags(), hf);
        b.set(ValueLayout.JAVA_LONG_UNALIGNED, layout.eip(), 0);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, layout.oldException(), -1);
        e.contextRestore(c.scratch);
        e.flushTlb();
        c.pendingVector = -1;
        startCpu(cpu, 0);
    }

    @Override protected boolean stoppedAtIdleInstruction() { return haltedAtHlt(); }

    @Override protected boolean idleEnds() {
        return nmiPending() || ((uc.regRead(X86Reg.RFLAGS) & RFLAGS_IF) != 0 && interruptPending());
    }

    @Override protected boolean mayWakeLater() { return (uc.regRead(X86Reg.RFLAGS) & RFLAGS_IF) != 0; }

    /**
     * A 64-bit x86 engine as the machine's vCPUs run: CPU model Opteron_G1, which is Unicorn's
     * qemu64 without CX16 and LAHF_LM in the feature words its translator checks, so that
     * {@code cmpxchg16b} (and 64-bit {@code lahf}/{@code sahf}) raise #UD and kpemu's native hook
     * executes them ({@link NativeCmpxchg16b}; Unicorn 2.1.4's own {@code cmpxchg16b} can leave
     * wrong flags, docs/x86-boot-notes.md). The guest never sees this model's CPUID: the machine
     * answers CPUID from qemu64's ({@link #openCpuidModelEngine}). Without kpemu's native library
     * the engine is qemu64 and the guest's CPUID hides CX16 instead ({@code X86Pc.cpuPolicy}).
     * Every x86 engine kpemu opens for execution or calibration uses it.
     */
    public static Unicorn openEngine() {
        return open(NativeCmpxchg16b.available() ? Unicorn.CPU_X86_OPTERON_G1 : Unicorn.CPU_X86_QEMU64);
    }

    /** A 64-bit x86 engine of the guest-visible CPU model, qemu64 (QEMU's default CPU, which the reference machine runs too): the CPUID probe's. */
    public static Unicorn openCpuidModelEngine() { return open(Unicorn.CPU_X86_QEMU64); }

    /** Whether the machine's engines run {@code cmpxchg16b} in kpemu's native hook, so the guest may see CX16. */
    public static boolean nativeCmpxchg16b() { return NativeCmpxchg16b.available(); }

    private static Unicorn open(int model) {
        return machineEngine(Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64, model));
    }

    /** A machine with {@code ramBytes} of RAM at physical 0 (named "ram"). */
    public static X86Machine create(long ramBytes) {
        Unicorn uc = openEngine();
        try {
            X86Machine m = new X86Machine(uc, 1_000_000_000L);
            m.memory().addRam("ram", 0, ramBytes);
            return m;
        } catch (RuntimeException e) {
            uc.close();
            throw e;
        }
    }

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public Unicorn openEngineOfSameKind() { return openEngine(); }

    /**
     * vCPU 0's interrupt latch and the counters; with several vCPUs then every other vCPU's latch
     * (their NMI inputs and controllers are the board's local APICs, parts of their own).
     */
    @Override protected void saveArchState(java.io.DataOutput out) throws java.io.IOException {
        out.writeInt(cpus[0].pendingVector);
        out.writeLong(exceptionsDelivered());
        out.writeLong(externalInterrupts);
        if (cpus.length > 1) {
            out.writeLong(nmisDelivered);
            for (int i = 1; i < cpus.length; i++) out.writeInt(cpus[i].pendingVector);
        }
    }

    @Override protected void restoreArchState(java.io.DataInput in) throws java.io.IOException {
        cpus[0].pendingVector = in.readInt();
        exceptionsDelivered = in.readLong();
        for (Cpu c : cpus) if (c.exceptions != null) c.exceptions.resetDelivered();
        externalInterrupts = in.readLong();
        if (cpus.length > 1) {
            nmisDelivered = in.readLong();
            for (int i = 1; i < cpus.length; i++) cpus[i].pendingVector = in.readInt();
        }
    }

    /**
     * The interrupt hook (every int3 of a probe, every exception kpemu delivers) with
     * {@link #inExceptionHook} set, without a capturing lambda: the client compiler allocated one
     * per call through {@code Unsafe.allocateInstance} (0.3 µs of each probe event in the job
     * bench, docs/reference.md).
     */
    private void onInterruptHook(int intno) {
        inExceptionHook = true;
        try {
            onException(intno);
        } finally {
            inExceptionHook = false;
        }
    }

    /** Runs an exception hook's work with {@link #inExceptionHook} set ({@link #setPc}). */
    private void inExceptionHook(Runnable work) {
        inExceptionHook = true;
        try {
            work.run();
        } finally {
            inExceptionHook = false;
        }
    }

    @Override public long pc() { return uc.regRead(X86Reg.RIP); }

    /**
     * Sets RIP. Inside the interrupt, invalid-instruction and syscall hooks (a probe's int3, every exception
     * kpemu delivers, the Java syscall path) RIP is written through a saved prefix of the CPU state rather than Unicorn's
     * register write: after those hooks Unicorn 2.1.4 looks the next block up from RIP anyway
     * ({@code cpu_handle_exception} returns into {@code cpu_exec}'s loop with no block to chain
     * from), while a RIP write also makes the engine leave that loop and enter it again (a second
     * {@code cpu_exec} per probe hit or exception, counted with uprobes). Anywhere else (between
     * runs, or in a hook that runs inside a block) the register write, whose exit is needed there.
     */
    @Override public void setPc(long pc) {
        if (inExceptionHook) {
            uc.contextSave(privilegeContext);
            privilegeBlob.set(ValueLayout.JAVA_LONG_UNALIGNED, layout.eip(), pc);
            uc.contextRestore(privilegeContext);
        } else {
            uc.regWrite(X86Reg.RIP, pc);
        }
    }

    @Override public long sp() { return uc.regRead(X86Reg.RSP); }

    /** The tables as they are now (CR0, CR4, CR3 read once): valid until the guest runs again. */
    @Override public PageTableWalker pageTables() { return walker.now(); }

    @Override
    public void mapKernelPages(long va, long pa, long size, java.util.function.IntToLongFunction tablePages) {
        X86PageMapper.map(uc, memory(), va, pa, size, tablePages);
    }

    public X86PageWalker walker() { return walker; }

    /** Number of exceptions and interrupts delivered to the guest so far (by the Java path and natively). */
    public long exceptionsDelivered() {
        long n = exceptionsDelivered;
        for (Cpu c : cpus) if (c.exceptions != null) n += c.exceptions.delivered();
        return n;
    }

    @Override public long faultsDeliveredNatively() {
        long n = 0;
        for (long d : nativeExceptionsDelivered()) n += d;
        return n;
    }

    /** Exceptions each vCPU's native hook has delivered (empty entries 0; a library without the hook: all 0). */
    long[] nativeExceptionsDelivered() {
        long[] n = new long[cpus.length];
        for (int i = 0; i < cpus.length; i++) n[i] = cpus[i].exceptions == null ? 0 : cpus[i].exceptions.delivered();
        return n;
    }

    /**
     * Which exceptions must reach the Java hook, told to a vCPU's native hook. The consumers of an
     * exception on x86 and what each must see:
     * <ul>
     * <li>the exception trace ({@code kpemu.trace.exceptions}): every one;</li>
     * <li>the trap handler ({@link #faultResolvedByHost}): per its {@link dev.kpemu.machine.FaultInterest}
     *     (the kprobes engine: faults whose pc is in its slot area, every one while probed text
     *     waits to be synced); a handler without one, every one;</li>
     * <li>the text guard: the host's frame writes update its expected bytes, so a frame written
     *     into its physical span goes to Java;</li>
     * <li>watchpoints ({@code w:}, {@link dev.kpemu.machine.Watchpoints}) see guest stores through a
     *     memory hook, never the exception path; neither the Java frame writes nor the native ones
     *     (through the engine, {@code uc_mem_write}) are reported as guest stores. Uprobes are host
     *     breakpoints of the instruction clock (no guest exception); fault injection acts in probe handlers.</li>
     * </ul>
     */
    private void forwardFaults(NativeExceptions nx) {
        long[] pcs = trapHandlerPcs(), frames = guardedPhysicalSpan();
        nx.forward(TRACE || trapHandlerSeesAllFaults(), pcs[0], pcs[1], frames[0], frames[1]);
    }

    @Override protected void faultConsumersChanged() {
        for (Cpu c : cpus) if (c.exceptions != null) forwardFaults(c.exceptions);
    }

    /** The guest's own debug registers; the guest loader calls {@link X86DebugRegisters#sync} after each write of one. */
    public X86DebugRegisters debugRegisters() { return debugRegisters; }

    /** External interrupts delivered so far. */
    public long externalInterrupts() { return externalInterrupts; }

    /**
     * With an interrupt controller in front of vCPU {@code cpu}: drives its line {@code irq}.
     * Without one: the vCPU's latch for vector {@code irq}, delivered at the next slice boundary
     * where its RFLAGS.IF is set.
     */
    @Override
    public void setInterruptLine(int cpu, int irq, boolean level) {
        InterruptController ic = interruptController(cpu);
        if (ic != null) {
            ic.setLine(irq, level);
            return;
        }
        Cpu c = cpus[cpu];
        if (level) c.pendingVector = irq;
        else if (c.pendingVector == irq) c.pendingVector = -1;
    }

    /**
     * Connects the CPU's NMI input (the APIC board's local APIC); without one nothing raises an
     * NMI. A pending NMI is taken at the next slice boundary, IF or not, and wakes HLT. Not
     * modelled: the CPU's blocking of further NMIs until the handler's IRET (one vCPU with nothing
     * driving LINT1 and no NMI watchdog never sees a second NMI during the first).
     */
    public void setNmiSource(NmiSource s) { cpus[0].nmiSource = s; }

    /** Connects vCPU {@code cpu}'s NMI input. */
    public void setNmiSource(int cpu, NmiSource s) { cpus[cpu].nmiSource = s; }

    /** External NMIs delivered so far. */
    public long nmisDelivered() { return nmisDelivered; }

    private long nmisDelivered;

    private boolean nmiPending() { return cpuState.nmiSource != null && cpuState.nmiSource.nmiPending(); }

    private boolean interruptPending() {
        InterruptController ic = interruptController();
        return ic != null ? ic.interruptAsserted() : cpuState.pendingVector >= 0;
    }

    // ------------------------------------------------------------------ exceptions

    private void onException(int intno) {
        long rip = pc();
        switch (intno) {
            case VEC_BP -> {
                // No exception-in-flight marker to clear: QEMU sets it only for faults
                // (raise_interrupt2 runs check_exception when !is_int; int3 is a software
                // interrupt), every fault branch below clears it, and the host's own translations
                // that can set it (invalidateCode) restore the CPU state around themselves. It
                // used to be cleared here by a whole-context save and restore per int3 (measured
                // on 2.1.1 before the run loop used exits, whose until-1 invalidation set it).
                // Unicorn reports int3 with RIP already past the 0xcc.
                var th = trapHandler();
                if (th != null && th.onBreakpoint(this, rip - 1, 0)) return;
                deliver(VEC_BP, rip, null);
            }
            case VEC_PF, VEC_DF, VEC_TS, VEC_NP, VEC_SS, VEC_GP, VEC_AC -> {
                uc.contextSave(scratchContext);
                int err = contextBlob.get(ValueLayout.JAVA_INT_UNALIGNED, layout.errorCode());
                clearExceptionInFlight();
                if (faultResolvedByHost(rip, intno)) return;
                deliver(intno, pc(), intno == VEC_DF ? 0 : err);
            }
            case VEC_DE -> {
                clearExceptionInFlightNow();
                if (faultResolvedByHost(rip, intno)) return;
                deliver(intno, pc(), null);
            }
            default -> {
                if (faultResolvedByHost(rip, intno)) return;
                deliver(intno, pc(), null);
            }
        }
    }

    /** Resets Unicorn's "exception in flight" marker (context already saved in scratchContext). */
    private void clearExceptionInFlight() {
        contextBlob.set(ValueLayout.JAVA_INT_UNALIGNED, layout.oldException(), -1);
        uc.contextRestore(scratchContext);
    }

    private void clearExceptionInFlightNow() {
        uc.contextSave(scratchContext);
        clearExceptionInFlight();
    }

    /**
     * Delivers {@code vector} through the guest's IDT as the CPU does in 64-bit mode: pick the
     * stack (IST, or RSP0 of the TSS on a privilege change), push SS, RSP, RFLAGS, CS, RIP and
     * the error code, clear IF for interrupt gates, jump to the gate's offset.
     */
    public void deliver(int vector, long returnRip, Integer errorCode) {
        if (TRACE && traceBudget-- > 0) {
            System.err.printf("[deliver %d at 0x%x err %s cr2 0x%x rsp 0x%x cs 0x%x ss 0x%x]%n", vector, returnRip, errorCode,
                    uc.regRead(X86Reg.CR2), uc.regRead(X86Reg.RSP), uc.regRead(X86Reg.CS), uc.regRead(X86Reg.SS));
        }
        Unicorn.X86Mmr idtr = uc.mmrRead(X86Reg.IDTR);
        if ((long) vector * 16 + 15 > Integer.toUnsignedLong(idtr.limit())) {
            requestStop(new StopReason.GuestError("exception " + vector + " beyond the IDT limit (triple fault)", returnRip));
            return;
        }
        long gateVa = idtr.base() + vector * 16L;
        long lo, hi;
        try {
            lo = readVirtualLong(gateVa);
            hi = readVirtualLong(gateVa + 8);
        } catch (GuestMemoryException e) {
            requestStop(new StopReason.GuestError("IDT not mapped while delivering exception " + vector, returnRip));
            return;
        }
        boolean present = ((lo >>> 47) & 1) != 0;
        if (!present) {
            requestStop(new StopReason.GuestError("no handler for exception " + vector + " (IDT gate not present)", returnRip));
            return;
        }
        long target = (lo & 0xffff) | ((lo >>> 32) & 0xffff_0000L) | (hi << 32);
        int selector = (int) ((lo >>> 16) & 0xffff);
        int ist = (int) ((lo >>> 32) & 7);
        int type = (int) ((lo >>> 40) & 0xf);

        long rsp = uc.regRead(X86Reg.RSP);
        long rflags = uc.regRead(X86Reg.RFLAGS);
        int cs = (int) uc.regRead(X86Reg.CS);
        int ss = (int) uc.regRead(X86Reg.SS);
        int cpl = ss & 3;
        int targetDpl = codeSegmentDpl(selector);
        long newRsp;
        if (ist != 0) {
            newRsp = readVirtualLong(uc.mmrRead(X86Reg.TR).base() + 0x24 + 8L * (ist - 1));
        } else if (targetDpl < cpl) {
            newRsp = readVirtualLong(uc.mmrRead(X86Reg.TR).base() + 4 + 8L * targetDpl);
        } else {
            newRsp = rsp;
        }
        newRsp &= ~0xfL;
        long[] frame = errorCode == null
                ? new long[] {returnRip, cs, rflags, rsp, ss}
                : new long[] {errorCode & 0xffff_ffffL, returnRip, cs, rflags, rsp, ss};
        newRsp -= 8L * frame.length;
        try {
            for (int i = 0; i < frame.length; i++) writeVirtualLong(newRsp + 8L * i, frame[i]);
        } catch (GuestMemoryException e) {
            requestStop(new StopReason.GuestError("exception stack not mapped while delivering exception " + vector, returnRip));
            return;
        }
        long newFlags = rflags & ~(RFLAGS_TF | RFLAGS_NT | RFLAGS_RF | RFLAGS_VM);
        if (type == 0xe) newFlags &= ~RFLAGS_IF;
        if (targetDpl != cpl) {
            // SS becomes the null selector with RPL = new CPL, as the CPU does in 64-bit mode.
            switchPrivilege(selector, targetDpl, SEG_FLAGS_CODE64, targetDpl, 0, targetDpl);
        } else if (selector != cs) {
            uc.regWrite(X86Reg.CS, selector);
        }
        uc.regWrite(X86Reg.RSP, newRsp);
        uc.regWrite(X86Reg.RFLAGS, newFlags);
        setPc(target);
        exceptionsDelivered++;
    }

    // QEMU segment-cache flags (the descriptor's high dword) for flat 64-bit code and data
    static final int DESC_A = 1 << 8, DESC_RW = 1 << 9, DESC_CS = 1 << 11, DESC_S = 1 << 12, DESC_DPL_SHIFT = 13,
            DESC_P = 1 << 15, DESC_L = 1 << 21, DESC_B = 1 << 22, DESC_G = 1 << 23;
    static final int SEG_FLAGS_CODE64 = DESC_G | DESC_L | DESC_P | DESC_S | DESC_CS | DESC_RW | DESC_A;
    static final int SEG_FLAGS_DATA = DESC_G | DESC_B | DESC_P | DESC_S | DESC_RW | DESC_A;

    /**
     * Loads CS and SS and sets the CPL the way the CPU does on an interrupt, exception or
     * syscall that changes privilege. Unicorn's register writes change only the selectors in
     * 64-bit mode (QEMU keeps the CPL in hflags and in SS's cached DPL), so the CPU state is
     * edited through a saved context at the calibrated offsets.
     */
    private void switchPrivilege(int csSel, int csDpl, int csFlags, int ssSel, int ssFlags, int cpl) {
        uc.contextSave(privilegeContext);
        MemorySegment b = privilegeBlob;
        long cs = layout.csCache(), ss = layout.ssCache();
        b.set(ValueLayout.JAVA_INT_UNALIGNED, cs + X86ContextLayout.SEG_SELECTOR, csSel);
        b.set(ValueLayout.JAVA_LONG_UNALIGNED, cs + X86ContextLayout.SEG_BASE, 0);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, cs + X86ContextLayout.SEG_LIMIT, -1);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, cs + X86ContextLayout.SEG_FLAGS, csFlags | (csDpl << DESC_DPL_SHIFT));
        b.set(ValueLayout.JAVA_INT_UNALIGNED, ss + X86ContextLayout.SEG_SELECTOR, ssSel);
        b.set(ValueLayout.JAVA_LONG_UNALIGNED, ss + X86ContextLayout.SEG_BASE, 0);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, ss + X86ContextLayout.SEG_LIMIT, ssFlags == 0 ? 0 : -1);
        b.set(ValueLayout.JAVA_INT_UNALIGNED, ss + X86ContextLayout.SEG_FLAGS, ssFlags | (cpl << DESC_DPL_SHIFT));
        int hf = b.get(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags());
        b.set(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags(), (hf & ~X86ContextLayout.HF_CPL_MASK) | cpl);
        uc.contextRestore(privilegeContext);
    }

    /** The current privilege level (QEMU's hflags CPL, read through the saved context). */
    public int cpl() {
        uc.contextSave(privilegeContext);
        return privilegeBlob.get(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags()) & X86ContextLayout.HF_CPL_MASK;
    }

    private int codeSegmentDpl(int selector) {
        Unicorn.X86Mmr gdtr = uc.mmrRead(X86Reg.GDTR);
        int index = selector & ~7;
        if (index == 0 || index + 7 > Integer.toUnsignedLong(gdtr.limit())) return selector & 3;
        long desc = readVirtualLong(gdtr.base() + index);
        return (int) ((desc >>> 45) & 3);
    }

    // ------------------------------------------------------------------ syscall

    /**
     * {@code syscall}: Unicorn never jumps to LSTAR; do what the CPU does (the hook runs at the
     * instruction). {@link NativeSyscall} does the same natively and calls this only for #UD.
     */
    private void onSyscall() {
        long rip = pc();
        long efer = uc.msrRead(MSR_EFER);
        if ((efer & 1) == 0) { // EFER.SCE clear: #UD, at the syscall
            long before = exceptionsDelivered;
            deliver(VEC_UD, rip, null);
            // Unicorn adds the instruction's length after the hook (as for LSTAR below)
            if (exceptionsDelivered != before) setPc(pc() - 2);
            return;
        }
        long star = uc.msrRead(MSR_STAR);
        long lstar = uc.msrRead(MSR_LSTAR);
        long fmask = uc.msrRead(MSR_FMASK);
        long rflags = uc.regRead(X86Reg.RFLAGS);
        uc.regWrite(X86Reg.RCX, rip + 2);
        uc.regWrite(X86Reg.R11, rflags);
        int kernelCs = (int) ((star >>> 32) & 0xfffc);
        switchPrivilege(kernelCs, 0, SEG_FLAGS_CODE64, kernelCs + 8, SEG_FLAGS_DATA, 0);
        uc.regWrite(X86Reg.RFLAGS, rflags & ~fmask & ~RFLAGS_RF);
        setPc(lstar - 2); // Unicorn adds the instruction length after the hook
    }

    // ------------------------------------------------------------------ run-loop hooks

    /**
     * Takes a pending external interrupt when the guest accepts it (RFLAGS.IF set, outside the
     * one-instruction shadow of {@code sti} and {@code mov/pop ss}); otherwise the slice ends at
     * the first block where the guest may take it (the interrupt-enable watch; the shadow's
     * instruction is always a one-instruction block, which the next slice runs first). Without
     * the watch, an interrupt the guest masked waited for a slice boundary that fell where IF was
     * set: a guest loop that keeps IF clear most of the time and whose length divides the slice
     * length meets every boundary at the same masked point and never takes its interrupt (Linux
     * 6.12's try_to_generate_entropy under a module mount: 6,250 instructions per iteration,
     * 32 per 200,000-instruction slice, the PIT's IRQ 0 pending for a whole minute of guest time).
     */
    @Override
    protected void beforeSlice() {
        if (cpuState.exceptions != null) cpuState.exceptions.useRam(memory);
        int traps = debugRegisters.takePending(cpu());
        if (traps != 0) {
            // the guest's own data breakpoint (X86DebugRegisters): a trap, after the access
            uc.regWrite(X86Reg.DR6, X86DebugRegisters.DR6_RESERVED_ONES | traps);
            deliver(VEC_DB, pc(), null);
        }
        if (nmiPending() && !inInterruptShadow() && cpuState.nmiSource.takeNmi()) {
            nmisDelivered++;
            deliver(VEC_NMI, pc(), null);
        }
        boolean pending = interruptPending();
        if (pending && (uc.regRead(X86Reg.RFLAGS) & RFLAGS_IF) != 0 && !inInterruptShadow()) {
            int v;
            InterruptController ic = interruptController();
            if (ic != null) {
                v = ic.acknowledge();   // the INTA cycle: the controller gives the vector
            } else {
                v = cpuState.pendingVector;
                cpuState.pendingVector = -1;
            }
            externalInterrupts++;
            deliver(v, pc(), null);
            pending = interruptPending();
        }
        watchInterruptEnable(pending);
    }

    /** True when the next instruction runs in the interrupt shadow of sti or mov/pop ss. */
    private boolean inInterruptShadow() {
        uc.contextSave(privilegeContext);
        return (privilegeBlob.get(ValueLayout.JAVA_INT_UNALIGNED, layout.hflags()) & X86ContextLayout.HF_INHIBIT_IRQ_MASK) != 0;
    }

    /**
     * Drops an engine's translated code for a guest-virtual range. Unicorn 2.1.1 translates
     * {@code va} through the engine's current page tables to find the blocks; when that walk fails
     * it sets CR2 and the exception-in-flight state as if the guest had faulted. The engine's CPU
     * state is saved and restored around the call so the guest never sees that (a secondary engine
     * gets a context of its own on first use).
     */
    @Override
    protected void dropTranslations(Unicorn engine, long va, long len) {
        keepingCpuState(engine, () -> super.dropTranslations(engine, va, len));
    }

    /**
     * Unicorn's own translations and memory-map changes made by the host can set the "exception in
     * flight" marker, after which the guest's next fault is reported as #DF (measured: a
     * {@code uc_mem_protect} at {@code start_kernel} turned Linux's next early #PF into vector 8):
     * the CPU state is saved before and restored after.
     */
    @Override
    protected void keepingCpuState(Unicorn engine, Runnable change) {
        Unicorn.Context saved = engine == uc ? scratchContext : secondaryContexts.computeIfAbsent(engine, Unicorn::contextAlloc);
        engine.contextSave(saved);
        try {
            change.run();
        } finally {
            engine.contextRestore(saved);
        }
    }

    /** The scratch contexts of the secondary engines ({@link #dropTranslations}), freed with the machine. */
    private final java.util.Map<Unicorn, Unicorn.Context> secondaryContexts = new java.util.IdentityHashMap<>();

    @Override
    protected StopReason afterIdleExit() {
        if (!haltedAtHlt()) return null;
        if (nmiPending()) return null;
        boolean canWake = (uc.regRead(X86Reg.RFLAGS) & RFLAGS_IF) != 0;
        if (canWake && interruptPending()) return null;
        if (canWake && clock.idleToNextEvent()) return null;
        return new StopReason.Halted(pc());
    }

    /** Unicorn ends uc_emu_start on HLT with RIP after it; the byte before RIP confirms it. */
    private boolean haltedAtHlt() {
        long rip = pc();
        try {
            return (readVirtual(rip - 1, 1)[0] & 0xff) == 0xf4;
        } catch (GuestMemoryException e) {
            return false;
        }
    }

    @Override
    protected StopReason onEngineError(UnicornException e) {
        return new StopReason.GuestError(e.getMessage(), pc());
    }

    @Override
    public void close() {
        for (Cpu c : cpus) c.close();
        for (Unicorn.Context c : secondaryContexts.values()) c.close();
        secondaryContexts.clear();
        super.close();
    }
}
