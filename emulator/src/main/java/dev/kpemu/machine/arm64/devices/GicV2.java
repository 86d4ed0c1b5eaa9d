package dev.kpemu.machine.arm64.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Deque;
import java.util.function.IntConsumer;
import java.util.function.IntSupplier;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.InterruptController;
import dev.kpemu.machine.IrqLine;

/**
 * A GICv2 (ARM IHI 0048B) for 1 to {@link #MAX_CPUS} CPUs, without the Security Extensions: the
 * distributor and the memory-mapped CPU interface, as two MMIO windows ({@link #distributor()},
 * {@link #cpuInterface()}); every CPU sees its own CPU interface at the same address, as on
 * QEMU's {@code virt}.
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
 *
 * <p>Several CPUs: the state of interrupt IDs 0-31 (enable, pending, active, priority, a PPI's
 * input level) is banked per CPU, and so is every CPU-interface register (GICC_CTLR, PMR, BPR,
 * the running priority, IAR/EOIR/HPPIR). An SGI is pending per source CPU: GICD_SGIR (target
 * list, all but self, self; filter 3 is reserved and sends nothing) sets the sender's bit in each
 * target's GICD_SPENDSGIR byte, GICC_IAR hands over the lowest-numbered source in CPUID (bits
 * 12:10, as HPPIR shows it) and the SGI stays pending while other sources remain. SPIs use the
 * 1-N model: GICD_ITARGETSR's byte names the CPUs that may take it, one acknowledge makes it
 * active for all. ITARGETSR0-7 read the reading CPU's own bit. GICD_TYPER.CPUNumber is N - 1.
 * Which CPU accesses the MMIO windows and whose IRQ output {@link #interruptAsserted} and
 * {@link #acknowledge} mean is asked of the {@link #setCurrentCpu current-CPU supplier}, which the
 * machine sets (with one CPU it is never asked). Kept from the one-CPU model, where QEMU differs:
 * SGI enable bits are writable, a GICD_ISPENDR0 write may set an SGI pending (from the writing
 * CPU), GICD_ITARGETSR stores the whole byte and with one CPU reads 1 for IDs 0-31 (QEMU's
 * uniprocessor GIC reads 0), GICD_CPENDSGIR reads 0 (the architecture has it read as GICD_SPENDSGIR).
 * EOIR's CPUID field is not compared (as QEMU).
 */
public final class GicV2 implements InterruptController, dev.kpemu.machine.Stateful {
    /** Interrupt IDs this GIC implements (GICD_TYPER.ITLinesNumber = 3). */
    public static final int NUM_IRQS = 128;
    public static final int SGI_COUNT = 16, PPI_BASE = 16, SPI_BASE = 32;
    /** CPU interfaces a GICv2 can have (GICD_ITARGETSR's byte, GICC_IAR's 3-bit CPUID). */
    public static final int MAX_CPUS = 8;
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
    /** GICD_SGIR's TargetListFilter values. */
    public static final int SGIR_TARGET_LIST = 0, SGIR_ALL_BUT_SELF = 1, SGIR_SELF = 2;

    // CPU interface register map (IHI 0048B table 4-2).
    public static final int GICC_CTLR = 0x00, GICC_PMR = 0x04, GICC_BPR = 0x08, GICC_IAR = 0x0c,
            GICC_EOIR = 0x10, GICC_RPR = 0x14, GICC_HPPIR = 0x18, GICC_ABPR = 0x1c, GICC_AIAR = 0x20,
            GICC_AEOIR = 0x24, GICC_AHPPIR = 0x28, GICC_APR0 = 0xd0, GICC_NSAPR0 = 0xe0, GICC_IIDR = 0xfc,
            GICC_DIR = 0x1000;
    /** GICv2, ARM implementer. */
    public static final int GICC_IIDR_VALUE = 0x0202_043b;
    public static final int GICC_CTLR_ENABLE = 1, GICC_CTLR_EOIMODE = 1 << 9;
    /** GICC_IAR/HPPIR: the SGI's source CPU. */
    public static final int IAR_CPUID_SHIFT = 10;

    /** One CPU interface: its registers, running priorities and SGI sources. */
    private static final class CpuInterface {
        final Deque<Integer> running = new ArrayDeque<>();
        /** Per SGI, the CPUs it is pending from (GICD_SPENDSGIR's byte). */
        final int[] sgiSources = new int[SGI_COUNT];
        int ctlr, pmr, bpr;
    }

    private final int cpus;
    /** Bits of the CPUs that exist. */
    private final int cpuMask;
    // Indexed by slot(cpu, id): IDs 0-31 banked per CPU (CPU 0's at 0-31, CPU c's at
    // NUM_IRQS + 32 (c - 1) + id), SPIs once at their ID; with one CPU, exactly the IDs.
    private final boolean[] enabled, latch, level, active;
    private final int[] priority;
    // Not banked: IDs 0-31's configuration is fixed, their targets read as the reading CPU.
    private final boolean[] edge = new boolean[NUM_IRQS];
    private final int[] target = new int[NUM_IRQS];
    private final CpuInterface[] cpu;
    private int distCtlr;
    private Runnable onAssert = () -> {};
    private IntConsumer onCpuAssert = c -> {};
    private IntSupplier currentCpu = () -> 0;
    private long acknowledged;

    private final Device.Mmio distributor = new Device.Mmio() {
        @Override public String name() { return "gicv2-distributor"; }
        @Override public long mmioSize() { return 0x1_0000; }
        @Override public long read(long offset, int size) { return distRead(current(), (int) offset, size); }
        @Override public void write(long offset, int size, long value) { distWrite(current(), (int) offset, size, value); }
        @Override public void reset() { GicV2.this.reset(); }
    };

    private final Device.Mmio cpuInterface = new Device.Mmio() {
        @Override public String name() { return "gicv2-cpu"; }
        @Override public long mmioSize() { return 0x1_0000; }
        @Override public long read(long offset, int size) { return cpuRead(current(), (int) offset); }
        @Override public void write(long offset, int size, long value) { cpuWrite(current(), (int) offset, (int) value); }
    };

    /** A GIC with one CPU interface. */
    public GicV2() { this(1); }

    /** A GIC with {@code cpus} CPU interfaces (1 to {@link #MAX_CPUS}). */
    public GicV2(int cpus) {
        if (cpus < 1 || cpus > MAX_CPUS) throw new IllegalArgumentException("GICv2 CPU interfaces: " + cpus);
        this.cpus = cpus;
        this.cpuMask = (1 << cpus) - 1;
        int slots = NUM_IRQS + SPI_BASE * (cpus - 1);
        enabled = new boolean[slots];
        latch = new boolean[slots];
        level = new boolean[slots];
        active = new boolean[slots];
        priority = new int[slots];
        cpu = new CpuInterface[cpus];
        for (int c = 0; c < cpus; c++) cpu[c] = new CpuInterface();
        reset();
    }

    /** The number of CPU interfaces. */
    public int cpus() { return cpus; }

    /** The distributor's MMIO window (64 KiB). */
    public Device.Mmio distributor() { return distributor; }

    /** The CPU interface's MMIO window (64 KiB; GICC_DIR at 0x1000), the accessing CPU's. */
    public Device.Mmio cpuInterface() { return cpuInterface; }

    /**
     * Tells the GIC which CPU is accessing it: asked at every MMIO access and by
     * {@link #interruptAsserted()} and {@link #acknowledge()} when there are several CPUs (the
     * machine answers with the vCPU whose engine is running). Default: CPU 0.
     */
    public void setCurrentCpu(IntSupplier current) { this.currentCpu = current == null ? () -> 0 : current; }

    /** The CPU the current access is from. */
    public int currentCpu() { return current(); }

    private int current() {
        if (cpus == 1) return 0;
        int c = currentCpu.getAsInt();
        if (c < 0 || c >= cpus) throw new IllegalStateException("GIC accessed by CPU " + c + " of " + cpus);
        return c;
    }

    /**
     * Called (from whatever context changed the state: an MMIO callback, a system-register hook,
     * a clock event) when an IRQ output may have gone up; the machine ends its slice soon.
     */
    public void onAssert(Runnable r) { this.onAssert = r == null ? () -> {} : r; }

    /** Called, besides {@link #onAssert}, with each CPU whose IRQ output is up after a change (to wake it). */
    public void onCpuAssert(IntConsumer c) { this.onCpuAssert = c == null ? x -> {} : c; }

    /** Interrupts acknowledged through GICC_IAR so far (all CPUs). */
    public long acknowledged() { return acknowledged; }

    public void reset() {
        Arrays.fill(enabled, false);
        Arrays.fill(latch, false);
        Arrays.fill(active, false);
        Arrays.fill(priority, 0);
        Arrays.fill(target, 0);
        for (int i = 0; i < NUM_IRQS; i++) edge[i] = i < SGI_COUNT;
        for (int i = 0; i < SPI_BASE; i++) target[i] = 1;
        for (CpuInterface ci : cpu) {
            ci.running.clear();
            Arrays.fill(ci.sgiSources, 0);
            ci.ctlr = ci.pmr = 0;
            ci.bpr = 2;
        }
        distCtlr = 0;
    }

    /** Where {@code cpu}'s state of interrupt {@code id} is kept. */
    private static int slot(int cpu, int id) {
        return id >= SPI_BASE || cpu == 0 ? id : NUM_IRQS + SPI_BASE * (cpu - 1) + id;
    }

    private void checkCpu(int c) {
        if (c < 0 || c >= cpus) throw new IllegalArgumentException("no CPU interface " + c);
    }

    // ------------------------------------------------------------------ lines and signal

    /** Drives an SPI's input line, or a PPI's of CPU 0. */
    @Override
    public void setLine(int intid, boolean high) {
        setPrivateLine(0, intid, high);
    }

    /** Drives PPI {@code intid} (16-31) of {@code cpu} (or an SPI, for any {@code cpu}). */
    public void setPrivateLine(int cpu, int intid, boolean high) {
        if (intid < SGI_COUNT || intid >= NUM_IRQS) throw new IllegalArgumentException("no interrupt line " + intid);
        checkCpu(cpu);
        int s = slot(cpu, intid);
        boolean was = level[s];
        level[s] = high;
        if (high && !was && edge[intid]) latch[s] = true;
        if (high) changed();
    }

    /** {@code cpu}'s PPI {@code intid} as a device's line (QEMU's per-CPU PPI inputs). */
    public IrqLine privateLine(int cpu, int intid) {
        if (intid < PPI_BASE || intid >= SPI_BASE) throw new IllegalArgumentException("not a PPI: " + intid);
        checkCpu(cpu);
        return high -> setPrivateLine(cpu, intid, high);
    }

    private boolean pending(int s, int id) { return latch[s] || (!edge[id] && level[s]); }

    public boolean isPending(int id) { return isPending(current(), id); }

    public boolean isPending(int cpu, int id) { return pending(slot(cpu, id), id); }

    public boolean isActive(int id) { return isActive(current(), id); }

    public boolean isActive(int cpu, int id) { return active[slot(cpu, id)]; }

    public boolean isEnabled(int id) { return isEnabled(current(), id); }

    public boolean isEnabled(int cpu, int id) { return enabled[slot(cpu, id)]; }

    public int priority(int id) { return priority(current(), id); }

    public int priority(int cpu, int id) { return priority[slot(cpu, id)]; }

    /** The CPUs SGI {@code sgi} is pending on {@code cpu} from (a bit per source CPU). */
    public int sgiSources(int cpu, int sgi) { return this.cpu[cpu].sgiSources[sgi]; }

    public int runningPriority() { return runningPriority(current()); }

    public int runningPriority(int c) {
        Deque<Integer> running = cpu[c].running;
        return running.isEmpty() ? IDLE_PRIORITY : priority[slot(c, running.peek())];
    }

    /** The interrupt ID GICC_IAR would return now (without acknowledging it), or {@link #SPURIOUS}. */
    public int highestPending() { return highestPending(current()); }

    /** As {@link #highestPending()}, for {@code c}'s CPU interface. */
    public int highestPending(int c) {
        CpuInterface ci = cpu[c];
        if ((distCtlr & 1) == 0 || (ci.ctlr & GICC_CTLR_ENABLE) == 0) return SPURIOUS;
        int best = SPURIOUS, bestPrio = Math.min(ci.pmr, runningPriority(c));
        int base = slot(c, 0);
        for (int i = 0; i < SPI_BASE; i++) {
            int s = base + i;
            if (!enabled[s] || active[s] || !pending(s, i)) continue;
            if (priority[s] < bestPrio) {
                best = i;
                bestPrio = priority[s];
            }
        }
        int bit = 1 << c;
        for (int i = SPI_BASE; i < NUM_IRQS; i++) {
            if (!enabled[i] || active[i] || (target[i] & bit) == 0 || !pending(i, i)) continue;
            if (priority[i] < bestPrio) {
                best = i;
                bestPrio = priority[i];
            }
        }
        return best;
    }

    /** The current CPU's IRQ output. */
    @Override
    public boolean interruptAsserted() { return highestPending(current()) != SPURIOUS; }

    /** {@code c}'s IRQ output. */
    public boolean interruptAsserted(int c) { return highestPending(c) != SPURIOUS; }

    /**
     * CPU {@code c}'s view of the GIC as the controller in front of that CPU (a machine's per-vCPU
     * {@code setInterruptController}): its IRQ output is {@code c}'s, its acknowledge is a GICC_IAR
     * read by {@code c}, and its input lines are {@code c}'s PPIs (16-31) and the shared SPIs, so
     * {@code Machine.setInterruptLine(c, id, level)} reaches {@code c}'s own PPI.
     */
    public InterruptController cpuController(int c) {
        checkCpu(c);
        return new InterruptController() {
            @Override public void setLine(int intid, boolean high) { setPrivateLine(c, intid, high); }
            @Override public boolean interruptAsserted() { return GicV2.this.interruptAsserted(c); }
            @Override public int acknowledge() { return GicV2.this.acknowledge(c); }
        };
    }

    private void changed() {
        boolean any = false;
        for (int c = 0; c < cpus; c++) {
            if (highestPending(c) != SPURIOUS) {
                any = true;
                onCpuAssert.accept(c);
            }
        }
        if (any) onAssert.run();
    }

    // ------------------------------------------------------------------ distributor

    /** A distributor read by the current CPU. */
    public long distRead(int off, int size) { return distRead(current(), off, size); }

    /** A distributor read by CPU {@code c}. */
    public long distRead(int c, int off, int size) {
        checkCpu(c);
        if (off == GICD_CTLR) return distCtlr;
        if (off == GICD_TYPER) return (NUM_IRQS / 32) - 1 | (cpus - 1) << 5;   // ITLinesNumber, CPUNumber; no security
        if (off == GICD_IIDR) return GICD_IIDR_VALUE;
        if (off >= GICD_IGROUPR && off < GICD_ISENABLER) return 0;
        if (off >= GICD_ISENABLER && off < GICD_ISPENDR) return bits(enabled, c, (off & 0x7f) * 8);
        if (off >= GICD_ISPENDR && off < GICD_ISACTIVER) return pendingBits(c, (off & 0x7f) * 8);
        if (off >= GICD_ISACTIVER && off < GICD_IPRIORITYR) return bits(active, c, (off & 0x7f) * 8);
        if (off >= GICD_IPRIORITYR && off < GICD_IPRIORITYR + NUM_IRQS) {
            long v = 0;
            for (int b = 0; b < size && off - GICD_IPRIORITYR + b < NUM_IRQS; b++) {
                v |= (long) (priority[slot(c, off - GICD_IPRIORITYR + b)] & 0xff) << (8 * b);
            }
            return v;
        }
        if (off >= GICD_ITARGETSR && off < GICD_ITARGETSR + NUM_IRQS) {
            long v = 0;
            for (int b = 0; b < size && off - GICD_ITARGETSR + b < NUM_IRQS; b++) {
                int id = off - GICD_ITARGETSR + b;
                v |= (long) ((id < SPI_BASE ? 1 << c : target[id]) & 0xff) << (8 * b);
            }
            return v;
        }
        if (off >= GICD_ICFGR && off < GICD_ICFGR + NUM_IRQS / 4) return cfgBits((off - GICD_ICFGR) * 4);
        if (off >= GICD_SPENDSGIR && off < GICD_SPENDSGIR + 16) {
            int first = off - GICD_SPENDSGIR;
            long v = 0;
            for (int b = 0; b < size && first + b < SGI_COUNT; b++) v |= (long) cpu[c].sgiSources[first + b] << (8 * b);
            return v;
        }
        if (off >= GICD_PIDR_BASE && off < 0x1000) return GICD_ID[(off - GICD_PIDR_BASE) >> 2];
        return 0;
    }

    /** A distributor write by the current CPU. */
    void distWrite(int off, int size, long value) { distWrite(current(), off, size, value); }

    /** A distributor write by CPU {@code c}. */
    public void distWrite(int c, int off, int size, long value) {
        checkCpu(c);
        int v = (int) value;
        if (off == GICD_CTLR) {
            distCtlr = v & 1;
        } else if (off >= GICD_ISENABLER && off < GICD_ICENABLER) {
            setBits(enabled, c, (off - GICD_ISENABLER) * 8, v, true);
        } else if (off >= GICD_ICENABLER && off < GICD_ISPENDR) {
            setBits(enabled, c, (off - GICD_ICENABLER) * 8, v, false);
        } else if (off >= GICD_ISPENDR && off < GICD_ICPENDR) {
            int first = (off - GICD_ISPENDR) * 8;
            for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) {
                if (((v >>> i) & 1) == 0) continue;
                int id = first + i;
                if (id < SGI_COUNT) setSgiSources(c, id, cpu[c].sgiSources[id] | 1 << c);
                else latch[slot(c, id)] = true;
            }
        } else if (off >= GICD_ICPENDR && off < GICD_ISACTIVER) {
            int first = (off - GICD_ICPENDR) * 8;
            for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) {
                if (((v >>> i) & 1) == 0) continue;
                int id = first + i;
                if (id < SGI_COUNT) setSgiSources(c, id, 0);
                else latch[slot(c, id)] = false;
            }
        } else if (off >= GICD_ISACTIVER && off < GICD_ICACTIVER) {
            setBits(active, c, (off - GICD_ISACTIVER) * 8, v, true);
        } else if (off >= GICD_ICACTIVER && off < GICD_IPRIORITYR) {
            setBits(active, c, (off - GICD_ICACTIVER) * 8, v, false);
        } else if (off >= GICD_IPRIORITYR && off < GICD_IPRIORITYR + NUM_IRQS) {
            for (int b = 0; b < size && off - GICD_IPRIORITYR + b < NUM_IRQS; b++) {
                priority[slot(c, off - GICD_IPRIORITYR + b)] = (int) (value >>> (8 * b)) & 0xff;
            }
        } else if (off >= GICD_ITARGETSR && off < GICD_ITARGETSR + NUM_IRQS) {
            for (int b = 0; b < size; b++) {      // SGI/PPI targets are read-only
                int id = off - GICD_ITARGETSR + b;
                if (id >= SPI_BASE && id < NUM_IRQS) target[id] = (int) (value >>> (8 * b)) & 0xff;
            }
        } else if (off >= GICD_ICFGR && off < GICD_ICFGR + NUM_IRQS / 4) {
            int first = (off - GICD_ICFGR) * 4;
            for (int i = 0; i < 16; i++) {
                int id = first + i;
                if (id >= SPI_BASE && id < NUM_IRQS) edge[id] = ((v >>> (2 * i + 1)) & 1) != 0;
            }
        } else if (off == GICD_SGIR) {
            int filter = (v >>> 24) & 3, sgi = v & 0xf;
            int targets = switch (filter) {
                case SGIR_TARGET_LIST -> (v >>> 16) & cpuMask;
                case SGIR_ALL_BUT_SELF -> cpuMask & ~(1 << c);
                case SGIR_SELF -> 1 << c;
                default -> 0;                                    // reserved
            };
            for (int t = 0; t < cpus; t++) {
                if ((targets & 1 << t) != 0) setSgiSources(t, sgi, cpu[t].sgiSources[sgi] | 1 << c);
            }
        } else if (off >= GICD_CPENDSGIR && off < GICD_CPENDSGIR + 16) {
            for (int b = 0; b < size; b++) {
                int sgi = off - GICD_CPENDSGIR + b;
                if (sgi < SGI_COUNT) setSgiSources(c, sgi, cpu[c].sgiSources[sgi] & ~(int) (value >>> (8 * b)));
            }
        } else if (off >= GICD_SPENDSGIR && off < GICD_SPENDSGIR + 16) {
            for (int b = 0; b < size; b++) {
                int sgi = off - GICD_SPENDSGIR + b;
                if (sgi < SGI_COUNT) setSgiSources(c, sgi, cpu[c].sgiSources[sgi] | (int) (value >>> (8 * b)) & cpuMask);
            }
        }
        changed();
    }

    /** An SGI is pending on {@code c} while it is pending from any source. */
    private void setSgiSources(int c, int sgi, int sources) {
        cpu[c].sgiSources[sgi] = sources;
        latch[slot(c, sgi)] = sources != 0;
    }

    private int bits(boolean[] a, int c, int first) {
        int v = 0;
        for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) if (a[slot(c, first + i)]) v |= 1 << i;
        return v;
    }

    private int pendingBits(int c, int first) {
        int v = 0;
        for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) if (isPending(c, first + i)) v |= 1 << i;
        return v;
    }

    private int cfgBits(int first) {
        int v = 0;
        for (int i = 0; i < 16 && first + i < NUM_IRQS; i++) if (edge[first + i]) v |= 2 << (2 * i);
        return v;
    }

    private static void setBits(boolean[] a, int c, int first, int v, boolean to) {
        for (int i = 0; i < 32 && first + i < NUM_IRQS; i++) if (((v >>> i) & 1) != 0) a[slot(c, first + i)] = to;
    }

    // ------------------------------------------------------------------ CPU interface

    /** A CPU-interface read by the current CPU. */
    public long cpuRead(int off) { return cpuRead(current(), off); }

    /** A read of CPU {@code c}'s interface. */
    public long cpuRead(int c, int off) {
        checkCpu(c);
        CpuInterface ci = cpu[c];
        return switch (off) {
            case GICC_CTLR -> ci.ctlr;
            case GICC_PMR -> ci.pmr;
            case GICC_BPR -> ci.bpr;
            case GICC_IAR -> acknowledge(c);
            case GICC_RPR -> Math.min(0xff, runningPriority(c));     // 0xff when idle
            case GICC_HPPIR -> {
                int id = highestPending(c);
                yield id < SGI_COUNT ? id | Integer.numberOfTrailingZeros(ci.sgiSources[id]) << IAR_CPUID_SHIFT : id;
            }
            case GICC_ABPR -> 3;
            case GICC_AIAR, GICC_AHPPIR -> SPURIOUS;
            case GICC_IIDR -> GICC_IIDR_VALUE;
            default -> 0;
        };
    }

    /** A CPU-interface write by the current CPU. */
    void cpuWrite(int off, int v) { cpuWrite(current(), off, v); }

    /** A write to CPU {@code c}'s interface. */
    public void cpuWrite(int c, int off, int v) {
        checkCpu(c);
        CpuInterface ci = cpu[c];
        switch (off) {
            case GICC_CTLR -> ci.ctlr = v & (GICC_CTLR_ENABLE | GICC_CTLR_EOIMODE | 0x1e0);
            case GICC_PMR -> ci.pmr = v & 0xff;
            case GICC_BPR -> ci.bpr = v & 7;
            case GICC_EOIR -> endOfInterrupt(c, v & 0x3ff);
            case GICC_DIR -> deactivate(c, v & 0x3ff);
            default -> { }
        }
        changed();
    }

    /**
     * What a GICC_IAR read by the current CPU does: the highest-priority pending interrupt
     * becomes active; its ID (an SGI's with the source CPU in bits 12:10), or {@link #SPURIOUS}.
     */
    @Override
    public int acknowledge() { return acknowledge(current()); }

    /** A GICC_IAR read by CPU {@code c}. */
    public int acknowledge(int c) {
        int id = highestPending(c);
        if (id == SPURIOUS) return SPURIOUS;
        CpuInterface ci = cpu[c];
        int s = slot(c, id), value = id;
        if (id < SGI_COUNT) {
            int src = Integer.numberOfTrailingZeros(ci.sgiSources[id]);
            setSgiSources(c, id, ci.sgiSources[id] & ~(1 << src));
            value |= src << IAR_CPUID_SHIFT;
        } else {
            latch[s] = false;
        }
        active[s] = true;
        ci.running.push(id);
        acknowledged++;
        return value;
    }

    private void endOfInterrupt(int c, int id) {
        if (id >= NUM_IRQS) return;
        CpuInterface ci = cpu[c];
        // Priority drop: the most recently acknowledged interrupt (the GIC expects EOIs in order).
        if (!ci.running.remove((Integer) id)) return;
        if ((ci.ctlr & GICC_CTLR_EOIMODE) == 0) active[slot(c, id)] = false;
    }

    private void deactivate(int c, int id) {
        if (id < NUM_IRQS) active[slot(c, id)] = false;
    }

    // ------------------------------------------------------------------ snapshot state

    /**
     * With one CPU the layout is the one-CPU model's (CPU 0's state, SGI sources implied by the
     * pending bits); with more, the other CPU interfaces and every CPU's SGI sources follow.
     */
    @Override
    public void saveState(DataOutput out) throws IOException {
        for (boolean[] a : new boolean[][] {enabled, latch, level, active}) for (boolean b : a) out.writeBoolean(b);
        for (boolean b : edge) out.writeBoolean(b);
        for (int v : priority) out.writeInt(v);
        for (int v : target) out.writeInt(v);
        saveCpu(out, cpu[0], 0);
        out.writeLong(acknowledged);
        for (int c = 1; c < cpus; c++) saveCpu(out, cpu[c], c);
        if (cpus > 1) for (CpuInterface ci : cpu) for (int m : ci.sgiSources) out.writeByte(m);
    }

    private void saveCpu(DataOutput out, CpuInterface ci, int c) throws IOException {
        out.writeInt(ci.running.size());
        for (int id : ci.running) out.writeInt(id);      // top first
        if (c == 0) out.writeInt(distCtlr);
        for (int v : new int[] {ci.ctlr, ci.pmr, ci.bpr}) out.writeInt(v);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        for (boolean[] a : new boolean[][] {enabled, latch, level, active}) for (int i = 0; i < a.length; i++) a[i] = in.readBoolean();
        for (int i = 0; i < edge.length; i++) edge[i] = in.readBoolean();
        for (int i = 0; i < priority.length; i++) priority[i] = in.readInt();
        for (int i = 0; i < target.length; i++) target[i] = in.readInt();
        restoreCpu(in, cpu[0], 0);
        acknowledged = in.readLong();
        for (int c = 1; c < cpus; c++) restoreCpu(in, cpu[c], c);
        for (int c = 0; c < cpus; c++) {
            for (int sgi = 0; sgi < SGI_COUNT; sgi++) {
                int m = cpus > 1 ? in.readUnsignedByte() & cpuMask : latch[sgi] ? 1 : 0;
                cpu[c].sgiSources[sgi] = m;
                if (cpus > 1 && (m != 0) != latch[slot(c, sgi)]) throw new IOException("GIC SGI sources disagree with pending state");
            }
        }
    }

    private void restoreCpu(DataInput in, CpuInterface ci, int c) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > NUM_IRQS) throw new IOException("GIC running-priority stack out of range");
        ci.running.clear();
        for (int i = 0; i < n; i++) {
            int id = in.readInt();
            if (id < 0 || id >= NUM_IRQS) throw new IOException("GIC interrupt id out of range");
            ci.running.addLast(id);
        }
        if (c == 0) distCtlr = in.readInt();
        ci.ctlr = in.readInt();
        ci.pmr = in.readInt();
        ci.bpr = in.readInt();
    }
}
