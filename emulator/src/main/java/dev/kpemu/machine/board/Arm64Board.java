package dev.kpemu.machine.board;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.arm64.devices.GenericTimer;
import dev.kpemu.machine.arm64.devices.GicV2;
import dev.kpemu.machine.arm64.devices.Pl011;

/**
 * kpemu's arm64 board: an {@link Arm64Machine} with a GICv2, the generic timer and a PL011,
 * wired together at the {@link Arm64Layout} addresses (QEMU {@code virt}'s). PSCI is the
 * machine's default hypercall handler.
 */
public record Arm64Board(Arm64Machine machine, GicV2 gic, GenericTimer timer, Pl011 uart, Pl011 terminalUart) implements AutoCloseable {

    /** A board with {@code ramBytes} of RAM; console bytes go to {@code console}. */
    public static Arm64Board create(long ramBytes, Pl011.Sink console) {
        return create(ramBytes, console, null);
    }

    /**
     * A board with a second PL011 at {@link Arm64Layout#TERMINAL_UART_BASE} when {@code terminal}
     * is not null: the guest command's terminal, its bytes to {@code terminal}.
     */
    public static Arm64Board create(long ramBytes, Pl011.Sink console, Pl011.Sink terminal) {
        Arm64Machine m = Arm64Machine.create(ramBytes);
        try {
            GicV2 gic = new GicV2();
            m.bus().attach(Arm64Layout.GIC_DIST_BASE, gic.distributor());
            m.bus().attach(Arm64Layout.GIC_CPU_BASE, gic.cpuInterface());
            m.setInterruptController(gic);
            gic.onAssert(m::endSliceSoon);
            GenericTimer timer = new GenericTimer(m, gic.line(GenericTimer.PPI_PHYS), gic.line(GenericTimer.PPI_VIRT));
            Pl011 uart = m.bus().attach(Arm64Layout.UART_BASE, new Pl011(console, gic.line(Arm64Layout.UART_INTID)));
            Pl011 term = terminal == null ? null : m.bus().attach(Arm64Layout.TERMINAL_UART_BASE,
                    new Pl011(terminal, gic.line(Arm64Layout.TERMINAL_UART_INTID)));
            // every vCPU added later reads and writes the timer's registers as vCPU 0 does (the
            // GIC and the timer still serve one PE: each vCPU's accesses reach PE 0's, step 4)
            m.onCpuAdded(cpu -> timer.hookEngine(m.engine(cpu), m.nativeLiveTime(cpu)));
            m.registerState("gicv2", gic);
            m.registerState("generic-timer", timer);
            m.registerState("uart0", uart);
            if (term != null) m.registerState("uart1", term);
            return new Arm64Board(m, gic, timer, uart, term);
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    @Override
    public void close() { machine.close(); }
}
