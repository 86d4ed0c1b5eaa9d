package dev.kpemu.machine.board;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.arm64.Psci;
import dev.kpemu.machine.arm64.devices.GenericTimer;
import dev.kpemu.machine.arm64.devices.GicV2;
import dev.kpemu.machine.arm64.devices.Pl011;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * kpemu's arm64 board: an {@link Arm64Machine} with a GICv2, the generic timer, a PL011 and PSCI
 * firmware (over HVC), wired together at the {@link Arm64Layout} addresses (QEMU {@code virt}'s),
 * with 1 to {@link GicV2#MAX_CPUS} PEs.
 *
 * <p>One PE ({@link #create(long, Pl011.Sink, Pl011.Sink)}): the board kpemu always had, byte for
 * byte the same runs: a one-CPU GIC in front of vCPU 0, one pair of timers, the one-PE
 * {@link Psci#Psci() PSCI} (no CPU power control). A vCPU a bare-metal test adds later with
 * {@code Machine.addCpu} gets the timer's hooks on its engine and reaches PE 0's timers.
 *
 * <p>N PEs ({@link #create(long, Pl011.Sink, Pl011.Sink, int)}, as QEMU's {@code virt -smp N}):
 * vCPUs 1 to N-1 are added to the machine ({@code Machine.addCpu}, stopped until PSCI starts them),
 * <ul>
 * <li>one {@link GicV2}{@code (N)} whose accessing CPU is the machine's current vCPU
 *   ({@code setCurrentCpu(machine::cpu)}), and in front of vCPU {@code k} its CPU-{@code k} view
 *   ({@link GicV2#cpuController}): an SGI, PPI or SPI delivered to CPU {@code k} raises vCPU
 *   {@code k}'s IRQ and ends its WFI (the run loop wakes a halted vCPU at the next slice boundary;
 *   the running vCPU's slice ends at once when its own output goes up);</li>
 * <li>one {@link GenericTimer}{@code (N)}: PE {@code k}'s timers on CPU {@code k}'s PPIs 30 and 27,
 *   the CNT* registers hooked in every vCPU's engine and answered for the current vCPU;</li>
 * <li>PE {@code k}'s MPIDR_EL1 affinity {@link Psci#mpidr}{@code (k)} (the EL1 read of MPIDR_EL1
 *   returns VMPIDR_EL2, which the board sets; the device tree's {@code reg});</li>
 * <li>PSCI {@link Psci#Psci(int, Psci.CpuControl, java.util.function.IntSupplier) with power
 *   control}: CPU_ON starts vCPU {@code k} at the entry point in the state Linux's boot protocol
 *   asks for a secondary (Documentation/arch/arm64/booting.rst: EL1h with DAIF masked, the MMU and
 *   caches off — SCTLR_EL1 as the PE's reset left it —, x0 the context id, x1-x3 zero, its TLB
 *   empty); CPU_OFF stops the calling vCPU before its next instruction.</li>
 * </ul>
 */
public record Arm64Board(Arm64Machine machine, GicV2 gic, GenericTimer timer, Pl011 uart, Pl011 terminalUart, Psci psci)
        implements AutoCloseable {

    /** A board with {@code ramBytes} of RAM; console bytes go to {@code console}. */
    public static Arm64Board create(long ramBytes, Pl011.Sink console) {
        return create(ramBytes, console, null);
    }

    /**
     * A board with a second PL011 at {@link Arm64Layout#TERMINAL_UART_BASE} when {@code terminal}
     * is not null: the guest command's terminal, its bytes to {@code terminal}. One PE.
     */
    public static Arm64Board create(long ramBytes, Pl011.Sink console, Pl011.Sink terminal) {
        return create(ramBytes, console, terminal, 1);
    }

    /** As {@link #create(long, Pl011.Sink, Pl011.Sink)} with {@code cpus} PEs (1 to {@link GicV2#MAX_CPUS}). */
    public static Arm64Board create(long ramBytes, Pl011.Sink console, Pl011.Sink terminal, int cpus) {
        if (cpus < 1 || cpus > GicV2.MAX_CPUS) {
            throw new IllegalArgumentException("an arm64 board has 1 to " + GicV2.MAX_CPUS + " CPUs (the GICv2's limit), not " + cpus);
        }
        Arm64Machine m = Arm64Machine.create(ramBytes);
        try {
            GicV2 gic = new GicV2(cpus);
            m.bus().attach(Arm64Layout.GIC_DIST_BASE, gic.distributor());
            m.bus().attach(Arm64Layout.GIC_CPU_BASE, gic.cpuInterface());
            GenericTimer timer;
            Psci psci;
            if (cpus == 1) {
                m.setInterruptController(gic);
                gic.onAssert(m::endSliceSoon);
                timer = new GenericTimer(m, gic.line(GenericTimer.PPI_PHYS), gic.line(GenericTimer.PPI_VIRT));
                // a vCPU a bare-metal test adds reads and writes the timer's registers as vCPU 0 does
                m.onCpuAdded(cpu -> timer.hookEngine(m.engine(cpu), m.nativeLiveTime(cpu)));
                psci = new Psci();
            } else {
                gic.setCurrentCpu(m::cpu);
                // the running vCPU stops at its next block when its own IRQ goes up; another vCPU's
                // interrupt waits for the slice boundary, where the run loop wakes it
                gic.onCpuAssert(c -> {
                    if (c == m.cpu()) m.endSliceSoon();
                });
                timer = new GenericTimer(m, cpus, gic::privateLine);
                timer.setCurrentPe(m::cpu);
                m.onCpuAdded(cpu -> timer.hookEngine(m.engine(cpu), m.nativeLiveTime(cpu)));
                for (int i = 1; i < cpus; i++) m.addCpu();
                long[] resetSctlr = new long[cpus];
                for (int i = 0; i < cpus; i++) {
                    m.setInterruptController(i, gic.cpuController(i));
                    Unicorn e = m.engine(i);
                    e.sysRegWrite(VMPIDR_EL2[0], VMPIDR_EL2[1], VMPIDR_EL2[2], VMPIDR_EL2[3], VMPIDR_EL2[4], MPIDR_RES1 | Psci.mpidr(i));
                    resetSctlr[i] = e.sysRegRead(SCTLR_EL1[0], SCTLR_EL1[1], SCTLR_EL1[2], SCTLR_EL1[3], SCTLR_EL1[4]);
                }
                PowerControl power = new PowerControl(m, resetSctlr);
                psci = new Psci(cpus, power, m::cpu);
                power.psci = psci;
                m.registerState("psci", psci);
            }
            m.setHypercallHandler(psci);
            Pl011 uart = m.bus().attach(Arm64Layout.UART_BASE, new Pl011(console, gic.line(Arm64Layout.UART_INTID)));
            Pl011 term = terminal == null ? null : m.bus().attach(Arm64Layout.TERMINAL_UART_BASE,
                    new Pl011(terminal, gic.line(Arm64Layout.TERMINAL_UART_INTID)));
            m.registerState("gicv2", gic);
            m.registerState("generic-timer", timer);
            m.registerState("uart0", uart);
            if (term != null) m.registerState("uart1", term);
            return new Arm64Board(m, gic, timer, uart, term, psci);
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /** The number of PEs (the machine's vCPUs). */
    public int cpus() { return gic.cpus(); }

    /** VMPIDR_EL2 (op0, op1, CRn, CRm, op2): what an EL1 read of MPIDR_EL1 returns when EL2 is enabled. */
    static final int[] VMPIDR_EL2 = {3, 4, 0, 0, 5};
    static final int[] SCTLR_EL1 = {3, 0, 1, 0, 0};
    /** MPIDR_EL1 bit 31, RES1 (the multiprocessor format); bit 30 (U, uniprocessor) clear. */
    static final long MPIDR_RES1 = 1L << 31;

    /**
     * PSCI's requests carried out on the machine, at once (from the caller's hypercall hook): the
     * target is another vCPU's engine, which does not run while the caller's hook does.
     */
    private static final class PowerControl implements Psci.CpuControl {
        private final Arm64Machine machine;
        private final long[] resetSctlr;
        Psci psci;

        PowerControl(Arm64Machine machine, long[] resetSctlr) {
            this.machine = machine;
            this.resetSctlr = resetSctlr;
        }

        @Override
        public void cpuOn(int pe, long entry, long contextId) {
            Unicorn e = machine.engine(pe);
            // MMU and caches off as at reset; the SCTLR write also rebuilds the engine's cached flags
            e.regWrite(Arm64Reg.PSTATE, Arm64Machine.PSTATE_EL1H_MASKED);
            e.sysRegWrite(SCTLR_EL1[0], SCTLR_EL1[1], SCTLR_EL1[2], SCTLR_EL1[3], SCTLR_EL1[4], resetSctlr[pe]);
            e.regWrite(Arm64Reg.X0, contextId);
            e.regWrite(Arm64Reg.X1, 0);
            e.regWrite(Arm64Reg.X2, 0);
            e.regWrite(Arm64Reg.X3, 0);
            e.flushTlb();
            machine.startCpu(pe, entry);
            psci.started(pe);
        }

        @Override
        public void cpuOff(int pe) { machine.stopCpu(pe); }
    }

    @Override
    public void close() { machine.close(); }
}
