package dev.kpemu.boot;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Psci;
import dev.kpemu.machine.arm64.devices.GenericTimer;
import dev.kpemu.machine.arm64.devices.GicV2;

/**
 * The device tree of kpemu's arm64 machine, describing exactly what it has: RAM, one
 * Cortex-A57 (or N, {@link #build(long, long, String, Initrd, boolean, int)}) started through PSCI
 * (over HVC), a GICv2, the generic timer, one PL011 with its 24 MHz APB clock, and
 * {@code /chosen} (command line, console, initrd). Node names, addresses and interrupt numbers
 * follow QEMU's {@code virt} board ({@link Arm64Layout}); with N CPUs, as {@code virt -smp N}:
 * {@code cpu@0} to {@code cpu@N-1}, each {@code reg} the PE's MPIDR affinity
 * ({@link Psci#mpidr}), and the timer's PPIs name all N CPUs in their CPU mask (GICv2 binding).
 */
public final class Arm64DeviceTree {
    /** phandles. */
    public static final int PHANDLE_GIC = 1, PHANDLE_APB_CLOCK = 2;
    /** GIC interrupt specifier flags: edge rising 1, level high 4; PPIs carry a CPU mask in bits 15:8. */
    static final int GIC_SPI = 0, GIC_PPI = 1, IRQ_LEVEL_HIGH = 4, PPI_CPU0 = 1 << 8;
    public static final int APB_CLOCK_HZ = 24_000_000;

    /**
     * {@code /chosen/rng-seed}: the bytes a boot loader hands the kernel's random-number generator,
     * as QEMU's {@code virt} board does (32 bytes). Without them the arm64 kernel's CRNG is not
     * ready for a long time, and every system call's random stack offset
     * ({@code randomize_kstack_offset}) ran ChaCha20 and BLAKE2s: 9,750 guest instructions for a
     * {@code getppid} instead of 331. kpemu's are fixed, so the guest's randomness is the same in
     * every run, as the rest of the machine is (QEMU's are the host's).
     */
    static final byte[] RNG_SEED = "kpemu: the same seed every boot.".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private Arm64DeviceTree() {}

    /** Where the initrd lies in guest-physical memory ({@code end} exclusive). */
    public record Initrd(long start, long end) {}

    public static String uartNode() { return "pl011@" + Long.toHexString(Arm64Layout.UART_BASE); }

    public static String terminalUartNode() { return "pl011@" + Long.toHexString(Arm64Layout.TERMINAL_UART_BASE); }

    /**
     * Builds the blob.
     *
     * @param ramSize bytes of RAM at {@link Arm64Layout#RAM_BASE}
     * @param bootargs the kernel command line
     * @param initrd the initrd's placement, or null
     */
    public static byte[] build(long ramSize, String bootargs, Initrd initrd) {
        return build(ramSize, 0, bootargs, initrd);
    }

    /**
     * Builds the blob with {@code hostBytes} more RAM after {@code ramSize} that the guest maps
     * but never allocates: a {@code /reserved-memory} child without {@code no-map}, so the kernel's
     * linear map covers it (page tables the host links there can be walked by the kernel's own
     * page-table dumper, which the W+X check runs at boot) while the kernel leaves it alone.
     */
    public static byte[] build(long ramSize, long hostBytes, String bootargs, Initrd initrd) {
        return build(ramSize, hostBytes, bootargs, initrd, false);
    }

    /**
     * As {@link #build(long, long, String, Initrd)}; with {@code terminalUart} a second PL011 (the
     * guest command's terminal) and {@code /aliases} that make the console {@code ttyAMA0} and the
     * terminal {@code ttyAMA1}.
     */
    public static byte[] build(long ramSize, long hostBytes, String bootargs, Initrd initrd, boolean terminalUart) {
        return build(ramSize, hostBytes, bootargs, initrd, terminalUart, 1);
    }

    /**
     * As {@link #build(long, long, String, Initrd, boolean)} for a machine of {@code cpus} PEs
     * (1 to {@link GicV2#MAX_CPUS}); with one, the same bytes.
     */
    public static byte[] build(long ramSize, long hostBytes, String bootargs, Initrd initrd, boolean terminalUart, int cpus) {
        if (cpus < 1 || cpus > GicV2.MAX_CPUS) throw new IllegalArgumentException("CPUs: " + cpus);
        FdtWriter w = new FdtWriter();
        w.beginNode("")
                .property("compatible", "linux,dummy-virt")
                .property("model", "kpemu arm64")
                .propertyU32("#address-cells", 2)
                .propertyU32("#size-cells", 2)
                .propertyU32("interrupt-parent", PHANDLE_GIC);

        w.beginNode("psci")
                .property("compatible", "arm,psci-1.0", "arm,psci-0.2")
                .property("method", "hvc")
                .endNode();

        w.beginNode("cpus")
                .propertyU32("#address-cells", 1)
                .propertyU32("#size-cells", 0);
        for (int i = 0; i < cpus; i++) {
            w.beginNode("cpu@" + i)
                    .property("device_type", "cpu")
                    .property("compatible", "arm,cortex-a57")
                    .propertyU32("reg", (int) Psci.mpidr(i))       // Aff3 is 0: one cell
                    .property("enable-method", "psci")
                    .endNode();
        }
        w.endNode();

        w.beginNode("memory@" + Long.toHexString(Arm64Layout.RAM_BASE))
                .property("device_type", "memory")
                .propertyU64("reg", Arm64Layout.RAM_BASE, ramSize + hostBytes)
                .endNode();
        if (hostBytes > 0) {
            long host = Arm64Layout.RAM_BASE + ramSize;
            w.beginNode("reserved-memory")
                    .propertyU32("#address-cells", 2)
                    .propertyU32("#size-cells", 2)
                    .property("ranges")
                    .beginNode("kpemu-host@" + Long.toHexString(host))
                    .propertyU64("reg", host, hostBytes)
                    .endNode()
                    .endNode();
        }

        w.beginNode("intc@" + Long.toHexString(Arm64Layout.GIC_DIST_BASE))
                .property("compatible", "arm,cortex-a15-gic")
                .propertyU32("#interrupt-cells", 3)
                .property("interrupt-controller")
                .propertyU64("reg", Arm64Layout.GIC_DIST_BASE, Arm64Layout.GIC_DIST_SIZE, Arm64Layout.GIC_CPU_BASE, Arm64Layout.GIC_CPU_SIZE)
                .propertyU32("phandle", PHANDLE_GIC)
                .endNode();

        int ppiFlags = PPI_CPU0 * ((1 << cpus) - 1) | IRQ_LEVEL_HIGH;
        w.beginNode("timer")
                .property("compatible", "arm,armv8-timer")
                .propertyU32("interrupts",
                        GIC_PPI, GenericTimer.PPI_SECURE_PHYS - 16, ppiFlags,
                        GIC_PPI, GenericTimer.PPI_PHYS - 16, ppiFlags,
                        GIC_PPI, GenericTimer.PPI_VIRT - 16, ppiFlags,
                        GIC_PPI, GenericTimer.PPI_HYP - 16, ppiFlags)
                .property("always-on")
                .endNode();

        w.beginNode("apb-pclk")
                .property("compatible", "fixed-clock")
                .propertyU32("#clock-cells", 0)
                .propertyU32("clock-frequency", APB_CLOCK_HZ)
                .property("clock-output-names", "clk24mhz")
                .propertyU32("phandle", PHANDLE_APB_CLOCK)
                .endNode();

        w.beginNode(uartNode())
                .property("compatible", "arm,pl011", "arm,primecell")
                .propertyU64("reg", Arm64Layout.UART_BASE, Arm64Layout.UART_SIZE)
                .propertyU32("interrupts", GIC_SPI, Arm64Layout.UART_SPI, IRQ_LEVEL_HIGH)
                .propertyU32("clocks", PHANDLE_APB_CLOCK, PHANDLE_APB_CLOCK)
                .property("clock-names", "uartclk", "apb_pclk")
                .endNode();

        if (terminalUart) {
            w.beginNode(terminalUartNode())
                    .property("compatible", "arm,pl011", "arm,primecell")
                    .propertyU64("reg", Arm64Layout.TERMINAL_UART_BASE, Arm64Layout.UART_SIZE)
                    .propertyU32("interrupts", GIC_SPI, Arm64Layout.TERMINAL_UART_SPI, IRQ_LEVEL_HIGH)
                    .propertyU32("clocks", PHANDLE_APB_CLOCK, PHANDLE_APB_CLOCK)
                    .property("clock-names", "uartclk", "apb_pclk")
                    .endNode();
            w.beginNode("aliases")
                    .property("serial0", "/" + uartNode())
                    .property("serial1", "/" + terminalUartNode())
                    .endNode();
        }

        w.beginNode("chosen")
                .property("bootargs", bootargs)
                .property("stdout-path", "/" + uartNode())
                .property("rng-seed", RNG_SEED);
        if (initrd != null) {
            w.propertyU64("linux,initrd-start", initrd.start());
            w.propertyU64("linux,initrd-end", initrd.end());
        }
        w.endNode();

        w.endNode();
        return w.finish();
    }
}
