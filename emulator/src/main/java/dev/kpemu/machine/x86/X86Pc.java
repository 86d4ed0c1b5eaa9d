package dev.kpemu.machine.x86;

import java.io.OutputStream;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.x86.devices.CmosRtc;
import dev.kpemu.machine.x86.devices.Pic8259;
import dev.kpemu.machine.x86.devices.Pit8254;
import dev.kpemu.machine.x86.devices.ResetControl;
import dev.kpemu.machine.x86.devices.Uart16550;

/**
 * kpemu's x86-64 PC: one CPU without a local APIC, the 8259 pair, the 8254 PIT on IRQ 0, a 16550
 * UART on COM1/IRQ 4, the CMOS RTC, the reset paths, and RAM from 0. The CPU is Unicorn's qemu64
 * with CPUID edited to match (no APIC, x2APIC, TSC-deadline; see {@link #cpuPolicy}).
 */
public final class X86Pc implements AutoCloseable {
    private final X86Machine machine;
    private final Pic8259 pic;
    private final Pit8254 pit;
    private final Uart16550 uart;
    private final CmosRtc rtc;
    private final ResetControl resetControl;
    private final X86Cpuid cpuid;

    public X86Pc(long ramBytes, OutputStream console, boolean tsc) {
        machine = X86Machine.create(ramBytes);
        try {
            var bus = machine.bus();
            pic = bus.attachPorts(Pic8259.MASTER_CMD, 2, new Pic8259());
            bus.attachPorts(Pic8259.SLAVE_CMD, 2, pic);
            bus.attachPorts(Pic8259.ELCR_MASTER, 2, pic);
            machine.setInterruptController(pic);
            pit = bus.attachPorts(Pit8254.CH0, 4, new Pit8254(machine.clock(), pic.line(X86Layout.IRQ_PIT)));
            bus.attachPorts(Pit8254.PORT_B, 1, pit);
            uart = bus.attachPorts(Uart16550.COM1_BASE, Uart16550.PORT_COUNT, new Uart16550(console, pic.line(X86Layout.IRQ_COM1)));
            rtc = bus.attachPorts(CmosRtc.INDEX, 2, new CmosRtc(machine.clock(), CmosRtc.DEFAULT_EPOCH_SECONDS));
            resetControl = new ResetControl(() -> machine.requestStopAtSliceEnd(new StopReason.Reset()));
            bus.attachPorts(ResetControl.KBD_DATA, 1, resetControl);
            bus.attachPorts(ResetControl.KBD_STATUS_CMD, 1, resetControl);
            bus.attachPorts(ResetControl.RESET_CONTROL, 1, resetControl);
            cpuid = cpuPolicy(X86Cpuid.probe(), tsc);
            cpuid.install(machine.engine());
        } catch (RuntimeException e) {
            machine.close();
            throw e;
        }
    }

    /**
     * This machine's CPUID: qemu64 without the features it lacks. No local APIC (there is none:
     * the kernel then runs the 8259 + PIT), no x2APIC or TSC-deadline. Without {@code tsc} the
     * TSC bit is cleared too: Unicorn's rdtsc reads the host clock and 2.1.1 cannot hook it, so a
     * deterministic guest must not use it as a clock.
     */
    public static X86Cpuid cpuPolicy(X86Cpuid c, boolean tsc) {
        c.clear(1, 0, 3, X86Cpuid.L1_EDX_APIC | (tsc ? 0 : X86Cpuid.L1_EDX_TSC));
        c.clear(1, 0, 2, X86Cpuid.L1_ECX_X2APIC | X86Cpuid.L1_ECX_TSC_DEADLINE);
        if (!tsc) c.clear(0x8000_0001, 0, 3, X86Cpuid.EXT1_EDX_RDTSCP);
        return c;
    }

    public X86Machine machine() { return machine; }
    public Pic8259 pic() { return pic; }
    public Pit8254 pit() { return pit; }
    public Uart16550 uart() { return uart; }
    public CmosRtc rtc() { return rtc; }
    public X86Cpuid cpuid() { return cpuid; }

    @Override public void close() { machine.close(); }
}
