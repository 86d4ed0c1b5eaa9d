package dev.kpemu.machine.arm64.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import java.util.ArrayDeque;
import java.util.Deque;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.InterruptController;

/**
 * A GICv2 (ARM IHI 0048B) for one CPU, without the Security Extensions: the distributor and
 * the memory-mapped CPU interface, as two MMIO windows ({@link #distributor()},
 * {@link #cpuInterface()}).
 *
 * <p>Why v2 and not v3: the v2 CPU interface is memory-mapped, so acknowledging and ending an
 * interrupt are plain MMIO accesses; a v3 CPU interface is the ICC_* system registers, which
 * Unicorn's Cortex-A57 does not implement (every access would be an MRS/MSR trap to emulate)
 * and v3 adds a redistributor. Linux's {@code arm,cortex-a15-gic} driver is built into
 * Debian's kernel and needs nothing more.
 *
 * <p>Model: interrupt IDs 0-15 are SGIs (edge), 16-31 PPIs (level), 32 and up SPIs (level or
 * edge per GICD_ICFGR). An interrupt is pending when its edge latch is set (an edge, a
 * GICD_ISPENDR write, an SGI) or, when level-sensitive, while its input line is high. The
 * highest-priority pending, enabled, inactive interrupt whose priority is below both the
 * priority mask and the running priority is signalled to the CPU; reading GICC_IAR
 * acknowledges it (active, edge latch cleared). GICC_EOIR drops the running priority and, with
 * GICC_CTLR.EOImode clear, deactivates; with EOImode set GICC_DIR deactivates. Priority
 * grouping (GICC_BPR) is not modelled: priorities compare in full.
 */
public final class GicV2 implements InterruptController, dev.kpemu.machine.Stateful {
    /** Interrupt IDs this GIC implements (GICD_TYPER.ITLinesNumber = 3). */
    public static final int NUM_IRQS = 128;
    public static final int SGI_COUNT = 16, PPI_BASE = 16, SPI_BASE = 32;
    /** Returned by GICC_IAR when nothing can be acknowledged. */
    public static final int SPURIOUS = 1023;
    /** Idle running priority (no active interrupt). */
    public static final int IDLE_PRIORITY = 0x100;

    // Distributor register map (IHI 0048B table 4-1).
    public static final int GICD_CTLR = 0x000, GICD_TYPER = 0x004, GICD_IIDR = 0x008,
            GICD_IGROUPR = 0x080, GICD_ISENABLER = 0x100, GICD_ICENABLER = 0x180,
            GICD_ISPENDR = 0x200, GICD_ICPENDR = 0x280, GICD_ISACTIVER = 0x300, GICD_ICACTIVER = 0x380,
            GICD_IPRIORITYR = 0x400, GICD_ITARGETSR = 0x800, GICD_ICFGR = 0xc00,
            GICD_SGIR = 0xf00, GICD_CPENDSGIR = 0xf10, GICD_SPENDSGIR = 0xf20, GICD_PIDR_BASE = 0xfd0;
    /** ARM's implementer code, revision and product as QEMU's GICv2 reports them. */
    public static final int GICD_IIDR_VALUE = 0x0200_043b;
    /** Peripheral/component ID bytes at 0xfd0..0xffc (ArchRev 2 in ICPIDR2). */
    private static final int[] GICD_ID = {0x04, 0x00, 0x00, 0x00, 0x90, 0xb4, 0x2b, 0x00, 0x0d, 0xf0, 0x05, 0xb1};

    // CPU interface register map (IHI 0048B table 4-2).
    public static final int GICC_CTLR = 0x00, GICC_PMR = 0x04, GICC_BPR = 0x08, GICC_IAR = 0x0c,
            GICC_EOIR = 0x10, GICC_RPR = 0x14, GICC_HPPIR = 0x18, GICC_ABPR = 0x1c, GICC_AIAR = 0x20,
            GICC_AEOIR = 0x24, GICC_AHPPIR = 0x28, GICC_APR0 = 0xd0, GICC_NSAPR0 = 0xe0, GICC_IIDR = 0xfc,
            GICC_DIR = 0x1000;
    /** GICv2, ARM implementer. */
    public static final int GICC_IIDR_VALUE = 0x0202_043b;
    public static final int GICC_CTLR_ENABLE = 1, GICC_CTLR_EOIMODE = 1 << 9;

    private final boolean[] enabled = new boolean[NUM_IRQS];
    private final boolean[] latch = new boolean[NUM_IRQS];
    private final boolean[] level = new boolean[NUM_IRQS];
    private final boolean[] active = new boolean[NUM_IRQS];
    private final boolean[] edge = new boolean[NUM_IRQS];
    private final int[] priority = new int[NUM_IRQS];
    private final int[] target = new int[NUM_IRQS];
    private final Deque<Integer> runningStack = new ArrayDeque<>();
    private int distCtlr, cpuCtlr, pmr, bpr;
    private Runnable onAssert = () -> {};
    private long acknowledged;

    private final Device.Mmio distributor = new Device.Mmio() {
        @Override public String name() { return "gicv2-distributor"; }
        @Override public long mmioSize() { return 0x1_0000; }
        @Override public long read(long offset, int size) { return distRead((int) offset, size); }
        @Override public void write(long offset, int size, long value) { distWrite((int) offset, size, value); }
        @Override public void reset() { GicV2.this.reset(); }
    };

    private final Device.Mmio cpuInterface = new Device.Mmio() {
        @Override public String name() { return "gicv2-cpu"; }
        @Override public long mmioSize() { return 0x1_0000; }
        @Override public long read(long offset, int size) { return cpuRead((int) offset); }
        @Override public void write(long offset, int size, long value) { cpuWrite((int) offset, (int) value); }
    };

    public GicV2() { reset(); }

    /** The distributor's MMIO window (64 KiB). */
    public Device.Mmio distributor() { return distributor; }

    /** The CPU interface's MMIO window (64 KiB; GICC_DIR at 0x1000). */
    public Device.Mmio cpuInterface() { return cpuInterface; }

    /**
     * Called (from whatever context changed the state: an MMIO callback, a system-register hook,
     * a clock event) when the IRQ output may have gone up; the machine ends its slice soon.
     */
    public void onAssert(Runnable r) { this.onAssert = r == null ? () -> {} : r; }

    /** Interrupts acknowledged through GICC_IAR so far. */
    public long acknowledged() { return acknowledged; }

    public void reset() {
        java.util.Arrays.fill(enabled, false);
        java.util.Arrays.fill(latch, false);
        java.util.Arrays.fill(active, false);
        java.util.Arrays.fill(priority, 0);
        java.util.Arrays.fill(target, 0);
        for (int i = 0; i < NUM_IRQS; i++) edge[i] = i < SGI_COUNT;
        for (int i = 0; i < SPI_BASE; i++) target[i] = 1;
        runningStack.clear();
        distCtlr = cpuCtlr = pmr = 0;
        bpr = 2;
    }

    // ------------------------------------------------------------------ lines and signal

    @Override
    public void setLine(int intid, boolean high) {
        if (intid < SGI_COUNT || intid >= NUM_IRQS) throw new IllegalArgumentException("no interrupt line " + intid);
        boolean was = level[intid];
        level[intid] = high;
        if (high && !was && edge[intid]) latch[intid] = true;
        if (high) changed();
    }

    public boolean isPending(int id) { return latch[id] || (!edge[id] && level[id]); }

    public boolean isActive(int id) { return active[id]; }

    public boolean isEnabled(int id) { return enabled[id]; }

    public int priority(int id) { return priority[id]; }

    public int runningPriority() { return runningStack.isEmpty() ? IDLE_PRIORITY : priority[runningStack.peek()]; }

    /** The interrupt GICC_IAR would return now (without acknowledging it), or {@link #SPURIOUS}. */
    public int highestPending() {
        if ((distCtlr & 1) == 0 || (cpuCtlr & GICC_CTLR_ENABLE) == 0) return SPURIOUS;
        int best = SPURIOUS, bestPrio = Math.min(pmr, runningPriority());
        for (int i = 0; i < NUM_IRQS; i++) {
            if (!enabled[i] || active[i] || (target[i] & 1) == 0 || !isPending(i)) continue;
            if (priority[i] < bestPrio) {
                best = i;
                bestPrio = priority[i];
            }
        }
        return best;
    }

    @Override
    public boolean interruptAsserted() { return highestPending() != SPURIOUS; }

    private void changed() {
        if (interruptAsserted()) onAssert.run();
    }

    // ------------------------------------------------------------------ distributor

    public long distRead(int off, int size) {
        if (off == GICD_CTLR) return distCtlr;
        if (off == GICD_TYPER) return (NUM_IRQS / 32) - 1;            // ITLinesNumber; CPUNumber 0; no security
        if (off == GICD_IIDR) return GICD_IIDR_VALUE;
        if (off >= GICD_IGROUPR && off < GICD_ISENABLER) return 0;
        if (off >= GICD_ISENABLER && off < GICD_ISPENDR) return bits(enabled, (off & 0x7f) * 8);
        if (off >= GICD_ISPENDR && off < GICD_ISACTIVER) return pendingBits((off & 0x7f) * 8);
        if (off >= GICD_ISACTIVER && off < GICD_IPRIORITYR) return bits(active, (off & 0x7f) * 8);
        if (off >= GICD_IPRIORITYR && off < GICD_IPRIORITYR + NUM_IRQS) return bytes(priority, off - GICD_IPRIORITYR, size);
        if (off >= GICD_ITARGETSR && off < GICD_ITARGETSR + NUM_IRQS) return bytes(target, off - GICD_ITARGETSR, size);
        if (off >= GICD_ICFGR && off < GICD_ICFGR + NUM_IRQS / 4) return cfgBits((off - GICD_ICFGR) * 4);
        if (off >= GICD_SPENDSGIR && off < GICD_SPENDSGIR + 16) {
            long v = 0;
            for (int b = 0; b < size; b++) {
                int sgi = off - GICD_SPENDSGIR + b;
                if (sgi < SGI_COUNT && latch[sgi]) v |= 1L << (8 * b);     // source CPU 0
            }
            return v;
        }
        if (off >= GICD_PIDR_BASE && off < 0x1000) return GICD_ID[(off - GICD_PIDR_BASE) >> 2];
        return 0;
    }

    void distWrite(int off, int size, long value) {
        int v = (int) value;
        if (off == GICD_CTLR) {
            distCtlr = v & 1;
        } else if (off >= GICD_ISENABLER && off < GICD_ICENABLER) {
            setBits(enabled, (off - GICD_ISENABLER) * 8, v, true);
        } else if (off >= GICD_ICENABLER && off < GICD_ISPENDR) {
            setBits(enabled, (off - GICD_ICENABLER) * 8, v, false);
        } else if (off >= GICD_ISPENDR && off < GICD_ICPENDR) {
            setBits(latch, (off - GICD_ISPENDR) * 8, v, true);
        } else if (off >= GICD_ICPENDR && off < GICD_ISACTIVER) {
            setBits(latch, (off - GICD_ICPENDR) * 8, v, false);
        } else if (off >= GICD_ISACTIVER && off < GICD_ICACTIVER) {
            setBits(active, (off - GICD_ISACTIVER) * 8, v, true);
        } else if (off >= GICD_ICACTIVER && off < GICD_IPRIORITYR) {
            setBits(active, (off - GICD_ICACTIVER) * 8, v, false);
        } else if (off >= GICD_IPRIORITYR && off < GICD_IPRIORITYR + NUM_IRQS) {
            setBytes(priority, off - GICD_IPRIORITYR, size, value, 0, NUM_IRQS);
        } else if (off >= GICD_ITARGETSR && off < GICD_ITARGETSR + NUM_IRQS) {
            setBytes(target, off - GICD_ITARGETSR, size, value, SPI_BASE, NUM_IRQS);   // SGI/PPI targets are read-only
        } else if (off >= GICD_ICFGR && off < GICD_ICFGR + NUM_IRQS / 4) {
            int first = (off - GICD_ICFGR) * 4;
            for (int i = 0; i < 16; i++) {
                int id = first + i;
                if (id >= SPI_BASE && id < NUM_IRQS) edge[id] = ((v >>> (2 * i + 1)) & 1) != 0;
            }
        } else if (off == GICD_SGIR) {
            int filter = (v >>> 24) & 3, targets = (v >>> 16) & 0xff, sgi = v & 0xf;
            boolean toSelf = filter == 2 || (filter == 0 && (targets & 1) != 0);   // filter 1: all others (none here)
            if (toSelf) latch[sgi] = true;
        } else if (off >= GICD_CPENDSGIR && off < GICD_CPENDSGIR + 16) {
            for (int b = 0; b < size; b++) {
                int sgi = off - GICD_CPENDSGIR + b;
                if (sgi < SGI_COUNT && ((value >>> (8 * b)) & 1) != 0) latch[sgi] = false;
            }
        } else if (off >= GICD_SPENDSGIR && off < GICD_SPENDSGIR + 16) {
            for (int b = 0; b < size; b++) {
                int sgi = off - GICD_SPENDSGIR + b;
                if (sgi < SGI_COUNT && ((value >>> (8 * b)) & 1) != 0) latch[sgi] = true;
            }
        }
        changed();
    }

    private int bits(boolean[] a, int first) {
        int v = 0;
        for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) if (a[first + i]) v |= 1 << i;
        return v;
    }

    private int pendingBits(int first) {
        int v = 0;
        for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) if (isPending(first + i)) v |= 1 << i;
        return v;
    }

    private int cfgBits(int first) {
        int v = 0;
        for (int i = 0; i < 16 && first + i < NUM_IRQS; i++) if (edge[first + i]) v |= 2 << (2 * i);
        return v;
    }

    private static void setBits(boolean[] a, int first, int v, boolean to) {
        for (int i = 0; i < 32 && first + i < a.length; i++) if (((v >>> i) & 1) != 0) a[first + i] = to;
    }

    private static long bytes(int[] a, int first, int size) {
        long v = 0;
        for (int b = 0; b < size && first + b < a.length; b++) v |= (long) (a[first + b] & 0xff) << (8 * b);
        return v;
    }

    private static void setBytes(int[] a, int first, int size, long value, int from, int to) {
        for (int b = 0; b < size; b++) {
            int i = first + b;
            if (i >= from && i < to) a[i] = (int) (value >>> (8 * b)) & 0xff;
        }
    }

    // ------------------------------------------------------------------ CPU interface

    public long cpuRead(int off) {
        return switch (off) {
            case GICC_CTLR -> cpuCtlr;
            case GICC_PMR -> pmr;
            case GICC_BPR -> bpr;
            case GICC_IAR -> acknowledge();
            case GICC_RPR -> Math.min(0xff, runningPriority());     // 0xff when idle
            case GICC_HPPIR -> highestPending();
            case GICC_ABPR -> 3;
            case GICC_AIAR, GICC_AHPPIR -> SPURIOUS;
            case GICC_IIDR -> GICC_IIDR_VALUE;
            default -> 0;
        };
    }

    void cpuWrite(int off, int v) {
        switch (off) {
            case GICC_CTLR -> cpuCtlr = v & (GICC_CTLR_ENABLE | GICC_CTLR_EOIMODE | 0x1e0);
            case GICC_PMR -> pmr = v & 0xff;
            case GICC_BPR -> bpr = v & 7;
            case GICC_EOIR -> endOfInterrupt(v & 0x3ff);
            case GICC_DIR -> deactivate(v & 0x3ff);
            default -> { }
        }
        changed();
    }

    /** What a GICC_IAR read does: the highest-priority pending interrupt becomes active; its ID, or {@link #SPURIOUS}. */
    @Override
    public int acknowledge() {
        int id = highestPending();
        if (id == SPURIOUS) return SPURIOUS;
        latch[id] = false;
        active[id] = true;
        runningStack.push(id);
        acknowledged++;
        return id;                      // SGIs: source CPU 0 in bits 12:10
    }

    private void endOfInterrupt(int id) {
        if (id >= NUM_IRQS) return;
        // Priority drop: the most recently acknowledged interrupt (the GIC expects EOIs in order).
        if (!runningStack.remove((Integer) id)) return;
        if ((cpuCtlr & GICC_CTLR_EOIMODE) == 0) active[id] = false;
    }

    private void deactivate(int id) {
        if (id < NUM_IRQS) active[id] = false;
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        for (boolean[] a : new boolean[][] {enabled, latch, level, active, edge}) for (boolean b : a) out.writeBoolean(b);
        for (int[] a : new int[][] {priority, target}) for (int v : a) out.writeInt(v);
        out.writeInt(runningStack.size());
        for (int id : runningStack) out.writeInt(id);      // top first
        for (int v : new int[] {distCtlr, cpuCtlr, pmr, bpr}) out.writeInt(v);
        out.writeLong(acknowledged);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        for (boolean[] a : new boolean[][] {enabled, latch, level, active, edge}) for (int i = 0; i < a.length; i++) a[i] = in.readBoolean();
        for (int[] a : new int[][] {priority, target}) for (int i = 0; i < a.length; i++) a[i] = in.readInt();
        int n = in.readInt();
        if (n < 0 || n > NUM_IRQS) throw new IOException("GIC running-priority stack out of range");
        runningStack.clear();
        for (int i = 0; i < n; i++) {
            int id = in.readInt();
            if (id < 0 || id >= NUM_IRQS) throw new IOException("GIC interrupt id out of range");
            runningStack.addLast(id);
        }
        distCtlr = in.readInt();
        cpuCtlr = in.readInt();
        pmr = in.readInt();
        bpr = in.readInt();
        acknowledged = in.readLong();
    }
}
