package dev.kpemu.machine.arm64.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.function.IntSupplier;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.IrqLine;
import dev.kpemu.machine.VirtualClock;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.arm64.SysRegHooks;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.SysRegs;
import dev.kpemu.unicorn.Unicorn;

/**
 * The ARMv8 generic timer (ARM ARM D11) of 1 to {@link GicV2#MAX_CPUS} PEs: the one system
 * counter all PEs share and each PE's own EL1 physical and virtual timers, driven by the
 * machine's {@link VirtualClock} instead of host time.
 * Unicorn's own counter reads the host clock and its timer outputs go nowhere, so every
 * access to the CNT* registers is intercepted with the MRS/MSR instruction hooks and answered
 * here.
 *
 * <p>Counter: {@code CNTPCT = CNTVCT = guest nanoseconds / 16} (CNTFRQ = 62.5 MHz, QEMU's
 * frequency; CNTVOFF is 0). A timer whose CNTx_CTL has ENABLE set fires when the counter
 * reaches CNTx_CVAL: ISTATUS reads 1 from then on and, unless IMASK is set, its PPI is high
 * (level-sensitive): 30 for the physical timer, 27 for the virtual one. The expiry is a
 * virtual-clock event, so WFI idles straight to it.
 *
 * <p>Several PEs: one instance holds every PE's pair of timers ({@link #physical(int)},
 * {@link #virtual(int)}), each wired to its own PE's PPIs ({@link PpiLines}, on kpemu's board the
 * PE's own GIC CPU interface: {@link GicV2#privateLine}); the CNT* registers an MRS/MSR names are
 * the current PE's, asked of a supplier the machine sets ({@link #setCurrentPe}; with one PE never
 * asked). The counter needs no per-PE state (CNTVOFF is 0 on every PE). The MRS/MSR hooks are
 * installed in the machine's engine.
 */
public final class GenericTimer implements Device, dev.kpemu.machine.Stateful {
    /** Counter frequency; must divide 1e9 (nanoseconds per tick is an integer). */
    public static final long FREQUENCY_HZ = 62_500_000L;
    public static final long NANOS_PER_TICK = 1_000_000_000L / FREQUENCY_HZ;
    /** GIC interrupt IDs of the timers (DT: PPI 13, 14, 11, 10 = IDs 29, 30, 27, 26). */
    public static final int PPI_SECURE_PHYS = 29, PPI_PHYS = 30, PPI_VIRT = 27, PPI_HYP = 26;
    /** CNTx_CTL bits. */
    public static final long CTL_ENABLE = 1, CTL_IMASK = 2, CTL_ISTATUS = 4;

    /** Where each PE's timer outputs go: the line of PE {@code pe}'s PPI {@code intid} ({@link #PPI_PHYS}, {@link #PPI_VIRT}). */
    @FunctionalInterface
    public interface PpiLines {
        IrqLine line(int pe, int intid);
    }

    /** One EL1 timer (physical or virtual) of one PE. */
    public final class Timer {
        private final IrqLine irq;
        private long ctl, cval;
        private Object event;
        private boolean line;

        Timer(IrqLine irq) { this.irq = irq; }

        public long ctl() { return (ctl & (CTL_ENABLE | CTL_IMASK)) | (istatus() ? CTL_ISTATUS : 0); }

        public long cval() { return cval; }

        /** TVAL: the signed 32-bit distance from the counter to CVAL. */
        public long tval() { return (int) (cval - counter()) & 0xffff_ffffL; }

        public boolean istatus() { return (ctl & CTL_ENABLE) != 0 && Long.compareUnsigned(counter(), cval) >= 0; }

        public boolean interruptLine() { return line; }

        void writeCtl(long v) {
            ctl = v & (CTL_ENABLE | CTL_IMASK);
            update();
        }

        void writeCval(long v) {
            cval = v;
            update();
        }

        void writeTval(long v) {
            cval = counter() + (int) v;          // sign-extended 32-bit
            update();
        }

        void reset() {
            ctl = cval = 0;
            clock.cancel(event);
            event = null;
            setLine(false);
        }

        /** Re-evaluates the output and (re)schedules the expiry event. */
        void update() {
            clock.cancel(event);
            event = null;
            boolean status = istatus();
            setLine(status && (ctl & CTL_IMASK) == 0);
            if ((ctl & CTL_ENABLE) != 0 && !status && Long.compareUnsigned(cval, Long.MAX_VALUE / NANOS_PER_TICK) < 0) {
                event = clock.schedule(cval * NANOS_PER_TICK, this::expired);
            }
        }

        /** The expiry event is due. */
        void expired(long now) {
            event = null;
            update();
        }

        private void setLine(boolean l) {
            if (l == line) return;
            line = l;
            irq.set(l);
        }
    }

    private final Arm64Machine machine;
    private final VirtualClock clock;
    /** Per PE. */
    private final Timer[] phys, virt;
    private final SysRegHooks.Installed mrsHook, msrHook;
    private IntSupplier currentPe = () -> 0;
    private long accesses;

    /**
     * Attaches the timer to {@code machine} (installs the MRS/MSR hooks; do it before the guest
     * runs); the physical and virtual timers' outputs drive {@code physIrq} and {@code virtIrq}
     * (on kpemu's board: GIC PPIs {@link #PPI_PHYS} and {@link #PPI_VIRT}).
     */
    public GenericTimer(Arm64Machine machine, IrqLine physIrq, IrqLine virtIrq) {
        this(machine, 1, (pe, intid) -> intid == PPI_PHYS ? physIrq : virtIrq);
    }

    /**
     * Attaches the timers of {@code pes} PEs to {@code machine} (installs the MRS/MSR hooks); PE
     * {@code i}'s physical and virtual timers drive {@code lines.line(i, PPI_PHYS)} and
     * {@code lines.line(i, PPI_VIRT)}.
     */
    public GenericTimer(Arm64Machine machine, int pes, PpiLines lines) {
        if (pes < 1 || pes > GicV2.MAX_CPUS) throw new IllegalArgumentException("PEs: " + pes);
        this.machine = machine;
        this.clock = machine.clock();
        this.phys = new Timer[pes];
        this.virt = new Timer[pes];
        for (int i = 0; i < pes; i++) {
            phys[i] = new Timer(lines.line(i, PPI_PHYS));
            virt[i] = new Timer(lines.line(i, PPI_VIRT));
        }
        Unicorn uc = machine.engine();
        // Only op0=3, op1=3, CRn=14 (CNTFRQ, CNTPCT, CNTVCT, CNTP_*, CNTV_*) reach Java.
        // CNTPCT/CNTVCT reads are answered natively from the machine's clock (counter()'s value).
        this.mrsHook = SysRegHooks.installWithCounter(uc, Unicorn.ARM64_INS_MRS, 3, 3, 14, (u, reg, acc) -> onMrs(u, reg, acc.key()),
                machine.nativeLiveTime(), NANOS_PER_TICK);
        this.msrHook = SysRegHooks.install(uc, Unicorn.ARM64_INS_MSR, 3, 3, 14, (u, reg, acc) -> onMsr(u, reg, acc.key()));
    }

    /** The hooks installed on the machine's other vCPUs' engines ({@link #hookEngine}). */
    private final java.util.List<SysRegHooks.Installed> moreHooks = new java.util.ArrayList<>();

    /**
     * Installs the MRS/MSR hooks on another vCPU's engine (a board's per-vCPU set-up,
     * {@code Machine.onCpuAdded}); its system-counter reads are answered from that vCPU's own
     * instruction clock ({@code liveTime}: {@code Machine.nativeLiveTime(cpu)}). Which PE's timer an
     * access reaches is {@link #setCurrentPe}'s answer.
     */
    public void hookEngine(Unicorn uc, java.lang.foreign.MemorySegment liveTime) {
        moreHooks.add(SysRegHooks.installWithCounter(uc, Unicorn.ARM64_INS_MRS, 3, 3, 14, (u, reg, acc) -> onMrs(u, reg, acc.key()),
                liveTime, NANOS_PER_TICK));
        moreHooks.add(SysRegHooks.install(uc, Unicorn.ARM64_INS_MSR, 3, 3, 14, (u, reg, acc) -> onMsr(u, reg, acc.key())));
    }

    private long moreCounterReads() {
        long n = 0;
        for (SysRegHooks.Installed h : moreHooks) n += h.counterReads();
        return n;
    }

    @Override public String name() { return "generic-timer"; }

    @Override
    public void reset() {
        for (int i = 0; i < phys.length; i++) {
            phys[i].reset();
            virt[i].reset();
        }
    }

    /** The number of PEs. */
    public int pes() { return phys.length; }

    /** Tells the timer which PE an MRS/MSR comes from (the vCPU whose engine runs). Default: PE 0. */
    public void setCurrentPe(IntSupplier current) { this.currentPe = current == null ? () -> 0 : current; }

    private int current() {
        if (phys.length == 1) return 0;
        int pe = currentPe.getAsInt();
        if (pe < 0 || pe >= phys.length) throw new IllegalStateException("timer accessed by PE " + pe + " of " + phys.length);
        return pe;
    }

    /** The system counter now (CNTPCT_EL0 = CNTVCT_EL0). */
    public long counter() { return clock.liveNanos() / NANOS_PER_TICK; }

    /** The current PE's physical timer. */
    public Timer physical() { return phys[current()]; }

    /** The current PE's virtual timer. */
    public Timer virtual() { return virt[current()]; }

    public Timer physical(int pe) { return phys[pe]; }

    public Timer virtual(int pe) { return virt[pe]; }

    /** CNT* register accesses answered so far. */
    public long accesses() { return accesses + mrsHook.counterReads() + moreCounterReads(); }

    /** The value an MRS of {@code key} on the current PE reads, or null when the register is not the timer's. */
    Long read(int key) { return read(current(), key); }

    /** The value an MRS of {@code key} on PE {@code pe} reads, or null when the register is not the timer's. */
    public Long read(int pe, int key) {
        Timer phys = this.phys[pe], virt = this.virt[pe];
        if (key == SysRegs.CNTFRQ_EL0) return FREQUENCY_HZ;
        if (key == SysRegs.CNTVCT_EL0 || key == SysRegs.CNTPCT_EL0) return counter();
        if (key == SysRegs.CNTV_CTL_EL0) return virt.ctl();
        if (key == SysRegs.CNTV_CVAL_EL0) return virt.cval();
        if (key == SysRegs.CNTV_TVAL_EL0) return virt.tval();
        if (key == SysRegs.CNTP_CTL_EL0) return phys.ctl();
        if (key == SysRegs.CNTP_CVAL_EL0) return phys.cval();
        if (key == SysRegs.CNTP_TVAL_EL0) return phys.tval();
        return null;
    }

    /** Applies an MSR to {@code key} on the current PE; false when the register is not the timer's. */
    boolean write(int key, long v) { return write(current(), key, v); }

    /** Applies an MSR to {@code key} on PE {@code pe}; false when the register is not the timer's. */
    public boolean write(int pe, int key, long v) {
        Timer phys = this.phys[pe], virt = this.virt[pe];
        if (key == SysRegs.CNTV_CTL_EL0) virt.writeCtl(v);
        else if (key == SysRegs.CNTV_CVAL_EL0) virt.writeCval(v);
        else if (key == SysRegs.CNTV_TVAL_EL0) virt.writeTval(v);
        else if (key == SysRegs.CNTP_CTL_EL0) phys.writeCtl(v);
        else if (key == SysRegs.CNTP_CVAL_EL0) phys.writeCval(v);
        else if (key == SysRegs.CNTP_TVAL_EL0) phys.writeTval(v);
        else return key == SysRegs.CNTFRQ_EL0;       // read-only below EL3: ignore
        return true;
    }

    /** MRS/MSR instructions the engine reported to the timer's hooks (all registers). */
    public long sysRegInstructions() { return mrsHook.seen() + msrHook.seen(); }

    /** System-counter reads answered natively (never reached Java). */
    public long nativeCounterReads() { return mrsHook.counterReads(); }

    /** Hook calls that reached Java (timer registers only, with the native filter). */
    public long javaHookCalls() { return mrsHook.forwarded() + msrHook.forwarded(); }

    private boolean onMrs(Unicorn u, int reg, int key) {
        Long v = read(key);
        if (v == null) return false;
        accesses++;
        if (reg != Arm64Reg.XZR) u.regWrite(reg, v);
        return true;
    }

    private boolean onMsr(Unicorn u, int reg, int key) {
        if ((key >>> 7) != (SysRegs.CNTFRQ_EL0 >>> 7)) return false;     // fast path: not op0=3 op1=3 CRn=14
        long v = reg == Arm64Reg.XZR ? 0 : u.regRead(reg);
        if (!write(key, v)) return false;
        accesses++;
        return true;
    }

    // ------------------------------------------------------------------ snapshot state

    /** Each PE's physical then virtual timer, in PE order (with one PE, the one-PE layout), then the access count. */
    @Override
    public void saveState(DataOutput out) throws IOException {
        for (Timer t : timers()) {
            out.writeLong(t.ctl);
            out.writeLong(t.cval);
            out.writeBoolean(t.line);
            clock.writeEvent(out, t.event);
        }
        out.writeLong(accesses());
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        for (Timer t : timers()) {
            t.ctl = in.readLong();
            t.cval = in.readLong();
            t.line = in.readBoolean();
            t.event = clock.readEvent(in, t::expired);
        }
        accesses = in.readLong() - mrsHook.counterReads();
    }

    private Timer[] timers() {
        Timer[] all = new Timer[2 * phys.length];
        for (int i = 0; i < phys.length; i++) {
            all[2 * i] = phys[i];
            all[2 * i + 1] = virt[i];
        }
        return all;
    }
}
