package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.InterruptController;
import dev.kpemu.machine.Stateful;
import dev.kpemu.machine.VirtualClock;

/**
 * One vCPU's local APIC in xAPIC mode, as QEMU's {@code pc} machine has it (version register
 * 0x50014: version 0x14, six LVT entries): the 4 KiB register page at {@link #DEFAULT_BASE} as
 * that vCPU sees it ({@link Device.Mmio}: aligned 32-bit accesses; others read 0 and write
 * nothing), and the state of MSR 0x1B, IA32_APIC_BASE ({@link #apicBase}, {@link #writeApicBase}),
 * which the machine's MSR path reads and writes.
 * <p>
 * Modelled: ID (writable, bits 31:24), version, TPR, PPR (from TPR and the highest in-service
 * vector, SDM "Processor Priority Register"), EOI (clears the highest ISR bit; a level-triggered
 * vector, TMR set, is answered with an EOI broadcast through the {@link ApicBus}), LDR, DFR (flat
 * and cluster models), SVR (spurious vector, software enable), ISR/TMR/IRR (256 bits each), ESR
 * (errors accumulate and a write to ESR makes them readable, as the SDM says; send and receive of
 * an illegal vector 0-15, illegal register address), the ICR (bits 12, delivery status, always
 * reads idle: a message is delivered when written) sending fixed, lowest-priority (to one target,
 * the lowest APIC ID, with no arbitration, as QEMU), NMI, INIT (INIT level de-assert does
 * nothing), STARTUP, with the shorthands self, all and all-but-self and physical or logical
 * destinations, six LVT entries (timer, thermal and performance counter — stored only, nothing
 * drives them —, LINT0, LINT1, error), and the timer: divide configuration, initial and current
 * count, one-shot and periodic, counted at 1 GHz of guest time (QEMU's APIC bus clock, one count
 * per divisor nanoseconds of the {@link VirtualClock}), its expiries clock events; as the SDM says,
 * the count reaches zero and interrupts initial count × divisor after the load (QEMU's model
 * interrupts one count later, at (initial count + 1) × divisor), a periodic count reloads at zero,
 * a divide change goes on from the current count at the new rate, a masked timer counts without
 * interrupting. The CPU side
 * is {@link InterruptController}: {@link #interruptAsserted} and {@link #acknowledge} (IRR → ISR,
 * the vector), as the 8259 pair's INTA; LINT0 in ExtINT mode (or the APIC disabled in
 * IA32_APIC_BASE) passes the 8259's INTR through ({@link #connectExtInt}), the acknowledge then
 * being the 8259's, before the APIC's own requests, as QEMU orders them; NMIs (LINT1 in NMI
 * mode, NMI IPIs) are latched for the machine ({@link #nmiPending}, {@link #takeNmi}); INIT and
 * SIPI are reported to a {@link CpuControl}. Reset state is QEMU's: SVR 0xff (software disabled),
 * LVTs masked, and on the BSP LINT0 in ExtINT mode (virtual wire: the 8259's interrupts reach the
 * CPU before Linux programs the APIC).
 * <p>
 * Not modelled: x2APIC (qemu64 has no x2APIC CPUID flag; IA32_APIC_BASE.EXTD is ignored), the
 * TSC-deadline timer mode (LVT timer bit 18 is not writable), relocating the register page
 * (the base in IA32_APIC_BASE is stored; the board maps the page at its default address), the
 * SDM's rule that software disable sets and holds the LVT mask bits (QEMU does not apply it, and
 * its BSP's LINT0 is unmasked while software disabled), remote IRR of level-triggered LINT
 * inputs, SMI, arbitration priority (APR reads 0), EOI-broadcast suppression, the thermal and
 * performance-counter sources. Once disabled through IA32_APIC_BASE the APIC stays disabled
 * until reset (as QEMU). The CPU-control calls come from MMIO callbacks: the implementation
 * records them and the machine acts at its next safe point.
 */
public final class LocalApic implements Device.Mmio, InterruptController, dev.kpemu.machine.x86.NmiSource, Stateful {
    public static final long DEFAULT_BASE = 0xfee0_0000L;
    public static final int MSR_APIC_BASE = 0x1b;
    public static final long BASE_BSP = 1L << 8, BASE_EXTD = 1L << 10, BASE_ENABLE = 1L << 11, BASE_ADDRESS = 0xffff_f000L;
    public static final int VERSION = 0x0005_0014;
    /** The timer's input clock: QEMU's APIC runs on the nanosecond virtual clock. */
    public static final long BUS_CLOCK_HZ = 1_000_000_000L;
    // register offsets
    public static final int ID = 0x20, VER = 0x30, TPR = 0x80, APR = 0x90, PPR = 0xa0, EOI = 0xb0, RRD = 0xc0,
            LDR = 0xd0, DFR = 0xe0, SVR = 0xf0, ISR = 0x100, TMR = 0x180, IRR = 0x200, ESR = 0x280,
            ICR_LOW = 0x300, ICR_HIGH = 0x310, LVT_TIMER = 0x320, LVT_THERMAL = 0x330, LVT_PERF = 0x340,
            LVT_LINT0 = 0x350, LVT_LINT1 = 0x360, LVT_ERROR = 0x370, TIMER_INITIAL = 0x380, TIMER_CURRENT = 0x390,
            TIMER_DIVIDE = 0x3e0;
    // SVR
    public static final int SVR_ENABLE = 1 << 8;
    // LVT entries (index = (offset - LVT_TIMER) / 16)
    public static final int LVT_COUNT = 6, LVT_I_TIMER = 0, LVT_I_THERMAL = 1, LVT_I_PERF = 2, LVT_I_LINT0 = 3, LVT_I_LINT1 = 4, LVT_I_ERROR = 5;
    public static final int LVT_MASKED = 1 << 16, LVT_TIMER_PERIODIC = 1 << 17, LVT_LEVEL = 1 << 15, LVT_DELIVERY_SHIFT = 8;
    static final int[] LVT_WRITABLE = {
        0x300ff,            // timer: vector, mask, periodic (no TSC-deadline)
        0x107ff, 0x107ff,   // thermal, performance counter: vector, delivery mode, mask
        0x1a7ff, 0x1a7ff,   // LINT0, LINT1: vector, delivery mode, polarity, trigger, mask
        0x100ff             // error: vector, mask
    };
    // ICR
    public static final int ICR_DEST_LOGICAL = 1 << 11, ICR_LEVEL_ASSERT = 1 << 14, ICR_LEVEL_TRIGGER = 1 << 15,
            ICR_SHORTHAND_SHIFT = 18, ICR_WRITABLE = 0xc_cfff;
    public static final int SHORTHAND_NONE = 0, SHORTHAND_SELF = 1, SHORTHAND_ALL = 2, SHORTHAND_OTHERS = 3;
    // ESR bits
    public static final int ESR_SEND_ILLEGAL_VECTOR = 1 << 5, ESR_RECEIVE_ILLEGAL_VECTOR = 1 << 6, ESR_ILLEGAL_ADDRESS = 1 << 7;

    /** What the APIC tells its CPU beyond interrupts: the start-up messages. */
    public interface CpuControl {
        /** An INIT message: the CPU resets (this APIC has reset itself already); an AP then waits for a SIPI. */
        void init();

        /** A STARTUP message to a CPU waiting for one: it starts in real mode at {@code vector << 12} (CS = vector << 8, IP = 0). */
        void startup(int vector);

        CpuControl NONE = new CpuControl() {
            @Override public void init() {}
            @Override public void startup(int vector) {}
        };
    }

    private final VirtualClock clock;
    private final ApicBus bus;
    private final CpuControl cpu;
    private final boolean bsp;
    private final String name;
    private InterruptController extInt;

    private long apicBase;
    private int id, tpr, svr, ldr, dfr, esr, pendingEsr, icrLow, icrHigh;
    private final int[] isr = new int[8], tmr = new int[8], irr = new int[8];
    private final int[] lvt = new int[LVT_COUNT];
    private int divideConfig;
    private long initialCount;     // unsigned 32-bit (Linux calibrates with 0xffffffff)
    private long timerStart;       // when the count last (re)started at timerStartCount
    private long timerStartCount;
    private long timerDue;         // the expiry the pending event is for
    private Object timerEvent;
    private boolean nmiPending, waitForSipi, lint0Level, lint1Level;

    /**
     * A local APIC with APIC ID {@code apicId} on {@code bus} (this constructor attaches it there).
     *
     * @param bsp the bootstrap processor's APIC (IA32_APIC_BASE.BSP, LINT0 in ExtINT mode at reset, no wait for SIPI)
     */
    public LocalApic(int apicId, boolean bsp, VirtualClock clock, ApicBus bus, CpuControl cpu) {
        if (apicId < 0 || apicId > 0xfe) throw new IllegalArgumentException("xAPIC ID " + apicId);
        this.clock = clock;
        this.bus = bus;
        this.cpu = cpu;
        this.bsp = bsp;
        this.id = apicId;
        this.name = "lapic" + apicId;
        reset();
        bus.attach(this);
    }

    /** Connects LINT0's input to the 8259 pair's INTR (virtual wire mode): polled, its INTA used for ExtINT. */
    public void connectExtInt(InterruptController pic) { this.extInt = pic; }

    /** "lapic" and the APIC ID it was built with (the guest may rewrite the ID register). */
    @Override public String name() { return name; }

    @Override public long mmioSize() { return 0x1000; }

    /** Power-on / RESET state (QEMU's {@code apic_reset_common}); the APIC ID is kept. */
    @Override
    public void reset() {
        apicBase = DEFAULT_BASE | (bsp ? BASE_BSP : 0) | BASE_ENABLE;
        initReset();
        if (bsp) lvt[LVT_I_LINT0] = ApicDelivery.EXTINT << LVT_DELIVERY_SHIFT;
        lint0Level = lint1Level = false;
    }

    /** The state an INIT message leaves (ID and IA32_APIC_BASE kept). */
    private void initReset() {
        tpr = 0;
        svr = 0xff;
        ldr = 0;
        dfr = 0xf;
        java.util.Arrays.fill(isr, 0);
        java.util.Arrays.fill(tmr, 0);
        java.util.Arrays.fill(irr, 0);
        java.util.Arrays.fill(lvt, LVT_MASKED);
        esr = pendingEsr = icrLow = icrHigh = 0;
        divideConfig = 0;
        initialCount = 0;
        timerStart = 0;
        timerStartCount = 0;
        cancelTimer();
        nmiPending = false;
        waitForSipi = !bsp;
    }

    // ------------------------------------------------------------------ accessors

    /** The APIC ID (the ID register's bits 31:24). */
    public int apicId() { return id; }

    public boolean isBsp() { return bsp; }

    /** IA32_APIC_BASE as RDMSR reads it. */
    public long apicBase() { return apicBase; }

    /**
     * WRMSR to IA32_APIC_BASE: the base address is stored; clearing EN disables the APIC (SVR's
     * software enable cleared too) for good, as QEMU's; BSP is read-only; EXTD (x2APIC) ignored.
     */
    public void writeApicBase(long value) {
        apicBase = (value & BASE_ADDRESS) | (apicBase & (BASE_BSP | BASE_ENABLE));
        if ((value & BASE_ENABLE) == 0) {
            apicBase &= ~BASE_ENABLE;
            svr &= ~SVR_ENABLE;
        }
    }

    /** True while the APIC is enabled in IA32_APIC_BASE. */
    public boolean hardwareEnabled() { return (apicBase & BASE_ENABLE) != 0; }

    /** True while SVR's software enable is set. */
    public boolean softwareEnabled() { return (svr & SVR_ENABLE) != 0; }

    /** True while this APIC's CPU waits for a STARTUP message (an AP after reset or INIT). */
    public boolean waitingForSipi() { return waitForSipi; }

    /** The register at {@code offset} as a 32-bit read would see it (for tests and tracing). */
    public int register(int offset) { return (int) read(offset, 4); }

    // ------------------------------------------------------------------ priorities

    private static int highest(int[] tab) {
        for (int i = 7; i >= 0; i--) if (tab[i] != 0) return i * 32 + 31 - Integer.numberOfLeadingZeros(tab[i]);
        return -1;
    }

    private static boolean bit(int[] tab, int v) { return (tab[v >>> 5] & 1 << (v & 31)) != 0; }

    private static void set(int[] tab, int v) { tab[v >>> 5] |= 1 << (v & 31); }

    private static void clear(int[] tab, int v) { tab[v >>> 5] &= ~(1 << (v & 31)); }

    /** SDM: PPR = TPR when TPR[7:4] >= ISRV[7:4], else ISRV[7:4] << 4. */
    public int processorPriority() {
        int isrv = Math.max(highest(isr), 0);
        return (tpr >> 4) >= (isrv >> 4) ? tpr : isrv & 0xf0;
    }

    /** The highest IRR vector the APIC would hand the CPU now, or -1 (none, or blocked by PPR, or disabled). */
    private int deliverableVector() {
        if (!hardwareEnabled() || !softwareEnabled()) return -1;
        int v = highest(irr);
        if (v < 0 || (v >> 4) <= (processorPriority() >> 4)) return -1;
        return v;
    }

    /** True when LINT0 passes the 8259's INTR to the CPU and the 8259 asserts it. */
    private boolean extIntAsserted() {
        if (extInt == null) return false;
        int l = lvt[LVT_I_LINT0];
        boolean passes = !hardwareEnabled()
                || ((l & LVT_MASKED) == 0 && (l >> LVT_DELIVERY_SHIFT & 7) == ApicDelivery.EXTINT);
        return passes && extInt.interruptAsserted();
    }

    // ------------------------------------------------------------------ the CPU side

    /** LINT0 (line 0) and LINT1 (line 1) in fixed or NMI mode (ExtINT LINT0 is the 8259's, {@link #connectExtInt}). */
    @Override
    public void setLine(int line, boolean level) {
        if (line != 0 && line != 1) throw new IllegalArgumentException("LINT" + line);
        boolean old = line == 0 ? lint0Level : lint1Level;
        if (line == 0) lint0Level = level; else lint1Level = level;
        int l = lvt[line == 0 ? LVT_I_LINT0 : LVT_I_LINT1];
        if ((l & LVT_MASKED) != 0 || !hardwareEnabled()) {
            if (!hardwareEnabled() && line == 1 && level && !old) nmiPending = true; // a disabled APIC: LINT1 is the CPU's NMI pin
            return;
        }
        int mode = l >> LVT_DELIVERY_SHIFT & 7;
        boolean levelTriggered = (l & LVT_LEVEL) != 0;
        switch (mode) {
            case ApicDelivery.FIXED -> {
                if (level && (!old || levelTriggered)) acceptFixed(l & 0xff, levelTriggered);
                else if (!level && levelTriggered) clear(irr, l & 0xff);
            }
            case ApicDelivery.NMI -> { if (level && !old) nmiPending = true; }
            default -> { }
        }
    }

    @Override
    public boolean interruptAsserted() { return extIntAsserted() || deliverableVector() >= 0; }

    /**
     * The CPU's interrupt acknowledge: the 8259's vector when LINT0 passes its INTR (ExtINT);
     * else the highest deliverable IRR vector, moved to ISR; else the spurious vector (SVR[7:0]).
     */
    @Override
    public int acknowledge() {
        if (extIntAsserted()) return extInt.acknowledge();
        int v = deliverableVector();
        if (v < 0) return svr & 0xff;
        clear(irr, v);
        set(isr, v);
        return v;
    }

    /** True while an NMI waits for the CPU (LINT1 in NMI mode, an NMI message). */
    @Override
    public boolean nmiPending() { return nmiPending; }

    /** The CPU takes the pending NMI; returns whether there was one. */
    @Override
    public boolean takeNmi() {
        boolean p = nmiPending;
        nmiPending = false;
        return p;
    }

    // ------------------------------------------------------------------ messages received (ApicBus)

    /** A fixed (or lowest-priority) interrupt for {@code vector}; level-triggered sets TMR. */
    void acceptFixed(int vector, boolean level) {
        if (vector < 16) {
            error(ESR_RECEIVE_ILLEGAL_VECTOR);
            return;
        }
        set(irr, vector);
        if (level) set(tmr, vector); else clear(tmr, vector);
    }

    void acceptNmi() { nmiPending = true; }

    void acceptInit() {
        initReset();
        cpu.init();
    }

    void acceptStartup(int vector) {
        if (!waitForSipi) return;
        waitForSipi = false;
        cpu.startup(vector & 0xff);
    }

    /** Physical destination {@code dest}: this APIC's ID, or the broadcast 0xff. */
    boolean matchesPhysical(int dest) { return dest == 0xff || dest == id; }

    /** Logical destination {@code dest} against LDR in the DFR's model (flat 0xf, cluster 0x0). */
    boolean matchesLogical(int dest) {
        if (dfr == 0xf) return (dest & ldr) != 0;
        if (dfr == 0x0) return (dest >> 4) == (ldr >> 4) && (dest & ldr & 0xf) != 0;
        return false;
    }

    private void error(int bits) {
        pendingEsr |= bits;
        int l = lvt[LVT_I_ERROR];
        if ((l & LVT_MASKED) == 0 && (l & 0xff) >= 16) {
            set(irr, l & 0xff);
            clear(tmr, l & 0xff);
        }
    }

    /** An LVT entry's local interrupt (timer, error): fixed delivery of its vector, edge. */
    private void localDeliver(int index) {
        int l = lvt[index];
        if ((l & LVT_MASKED) != 0) return;
        acceptFixed(l & 0xff, false);
    }

    private void eoi() {
        int v = highest(isr);
        if (v < 0) return;
        clear(isr, v);
        if (bit(tmr, v)) bus.eoiBroadcast(v);
    }

    // ------------------------------------------------------------------ timer

    /** The divisor that the divide configuration register selects (SDM: 000 → 2 … 110 → 128, 111 → 1). */
    public int timerDivisor() {
        int v = (divideConfig & 3) | (divideConfig >> 1 & 4);
        return 1 << ((v + 1) & 7);
    }

    private boolean periodic() { return (lvt[LVT_I_TIMER] & LVT_TIMER_PERIODIC) != 0; }

    private long nanosPerCount() { return (long) timerDivisor() * (1_000_000_000L / BUS_CLOCK_HZ); }

    /** The current-count register at guest time {@code now}. */
    private long currentCount(long now) {
        if (initialCount == 0) return 0;
        long counts = (now - timerStart) / nanosPerCount();
        if (counts < timerStartCount) return timerStartCount - counts;
        if (!periodic()) return 0;
        return initialCount - (counts - timerStartCount) % initialCount;
    }

    /** The count restarts now from {@code count} (load of the initial count, divide change). */
    private void restartTimer(long now, long count) {
        timerStart = now;
        timerStartCount = count;
        scheduleTimer(now);
    }

    /** Schedules the first expiry after {@code now}, if the timer runs and is unmasked. */
    private void scheduleTimer(long now) {
        cancelTimer();
        if (initialCount == 0 || timerStartCount == 0 || (lvt[LVT_I_TIMER] & LVT_MASKED) != 0) return;
        long unit = nanosPerCount();
        long first = timerStart + timerStartCount * unit;
        long due;
        if (first > now) {
            due = first;
        } else if (periodic()) {
            long period = initialCount * unit;
            due = first + ((now - first) / period + 1) * period;
        } else {
            return; // a one-shot count that has run out
        }
        timerDue = due;
        timerEvent = clock.schedule(due, this::timerFired);
    }

    private void cancelTimer() {
        if (timerEvent != null) clock.cancel(timerEvent);
        timerEvent = null;
    }

    private void timerFired(long now) {
        timerEvent = null;
        localDeliver(LVT_I_TIMER);
        if (periodic() && initialCount != 0) {
            timerDue += initialCount * nanosPerCount();
            timerEvent = clock.schedule(timerDue, this::timerFired);
        }
    }

    // ------------------------------------------------------------------ registers

    @Override
    public long read(long offset, int size) {
        if (size != 4 || (offset & 0xf) != 0) return 0;
        int off = (int) offset & 0xff0;
        int val = switch (off) {
            case ID -> id << 24;
            case VER -> VERSION;
            case TPR -> tpr;
            case APR, EOI, RRD -> 0;
            case PPR -> processorPriority();
            case LDR -> ldr << 24;
            case DFR -> dfr << 28 | 0x0fff_ffff;
            case SVR -> svr;
            case ESR -> esr;
            case ICR_LOW -> icrLow;
            case ICR_HIGH -> icrHigh;
            case TIMER_INITIAL -> (int) initialCount;
            case TIMER_CURRENT -> (int) currentCount(clock.liveNanos());
            case TIMER_DIVIDE -> divideConfig;
            default -> {
                if (off >= ISR && off < ISR + 0x80) yield isr[(off - ISR) >> 4];
                if (off >= TMR && off < TMR + 0x80) yield tmr[(off - TMR) >> 4];
                if (off >= IRR && off < IRR + 0x80) yield irr[(off - IRR) >> 4];
                if (off >= LVT_TIMER && off <= LVT_ERROR) yield lvt[(off - LVT_TIMER) >> 4];
                pendingEsr |= ESR_ILLEGAL_ADDRESS;
                yield 0;
            }
        };
        return val & 0xffff_ffffL;
    }

    @Override
    public void write(long offset, int size, long value) {
        if (size != 4 || (offset & 0xf) != 0) return;
        int off = (int) offset & 0xff0, v = (int) value;
        switch (off) {
            case ID -> id = v >>> 24;
            case TPR -> tpr = v & 0xff;
            case EOI -> eoi();
            case LDR -> ldr = v >>> 24;
            case DFR -> dfr = v >>> 28;
            case SVR -> svr = v & 0x1ff;
            case ESR -> {
                esr = pendingEsr;
                pendingEsr = 0;
            }
            case ICR_LOW -> {
                icrLow = v & ICR_WRITABLE;
                sendIpi();
            }
            case ICR_HIGH -> icrHigh = v & 0xff00_0000;
            case TIMER_INITIAL -> {
                initialCount = v & 0xffff_ffffL;
                restartTimer(clock.liveNanos(), initialCount);
            }
            case TIMER_DIVIDE -> {
                long now = clock.liveNanos();
                long count = currentCount(now);
                divideConfig = v & 0xb;
                if (initialCount != 0) restartTimer(now, count);
            }
            case VER, APR, PPR, RRD, TIMER_CURRENT -> { }
            default -> {
                if (off >= LVT_TIMER && off <= LVT_ERROR) {
                    int i = (off - LVT_TIMER) >> 4;
                    lvt[i] = v & LVT_WRITABLE[i];
                    if (i == LVT_I_TIMER) scheduleTimer(clock.liveNanos());
                } else if (off < ISR || off >= IRR + 0x80) {
                    pendingEsr |= ESR_ILLEGAL_ADDRESS; // ISR, TMR, IRR are read-only: writes are ignored
                }
            }
        }
    }

    private void sendIpi() {
        int mode = icrLow >> 8 & 7, vector = icrLow & 0xff;
        if ((mode == ApicDelivery.FIXED || mode == ApicDelivery.LOWEST_PRIORITY) && vector < 16) {
            error(ESR_SEND_ILLEGAL_VECTOR);
            return;
        }
        bus.sendIpi(this, icrLow, icrHigh >>> 24);
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        out.writeLong(apicBase);
        for (int v : new int[] {id, tpr, svr, ldr, dfr, esr, pendingEsr, icrLow, icrHigh, divideConfig}) out.writeInt(v);
        out.writeLong(initialCount);
        out.writeLong(timerStartCount);
        for (int[] tab : new int[][] {isr, tmr, irr, lvt}) for (int v : tab) out.writeInt(v);
        out.writeLong(timerStart);
        out.writeLong(timerDue);
        out.writeBoolean(nmiPending);
        out.writeBoolean(waitForSipi);
        out.writeBoolean(lint0Level);
        out.writeBoolean(lint1Level);
        clock.writeEvent(out, timerEvent);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        apicBase = in.readLong();
        id = in.readInt();
        tpr = in.readInt();
        svr = in.readInt();
        ldr = in.readInt();
        dfr = in.readInt();
        esr = in.readInt();
        pendingEsr = in.readInt();
        icrLow = in.readInt();
        icrHigh = in.readInt();
        divideConfig = in.readInt();
        initialCount = in.readLong();
        timerStartCount = in.readLong();
        if ((id & ~0xff) != 0 || (tpr & ~0xff) != 0 || (svr & ~0x1ff) != 0 || (ldr & ~0xff) != 0 || (dfr & ~0xf) != 0
                || (divideConfig & ~0xb) != 0 || (initialCount >>> 32) != 0 || timerStartCount < 0 || timerStartCount > initialCount) throw new IOException("local APIC state out of range");
        for (int[] tab : new int[][] {isr, tmr, irr, lvt}) for (int i = 0; i < tab.length; i++) tab[i] = in.readInt();
        timerStart = in.readLong();
        timerDue = in.readLong();
        nmiPending = in.readBoolean();
        waitForSipi = in.readBoolean();
        lint0Level = in.readBoolean();
        lint1Level = in.readBoolean();
        timerEvent = clock.readEvent(in, this::timerFired);
    }
}
