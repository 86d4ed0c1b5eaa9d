package dev.kpemu.machine.arm64;

/**
 * The arm64 guest-physical memory map and the board's interrupt numbers, in one place. It follows QEMU's {@code virt} board so
 * Linux's expectations (and device trees written for {@code virt}) carry over.
 */
public final class Arm64Layout {
    private Arm64Layout() {}

    /** GICv2 distributor. */
    public static final long GIC_DIST_BASE = 0x0800_0000L;
    public static final long GIC_DIST_SIZE = 0x0001_0000L;
    /** GICv2 CPU interface. */
    public static final long GIC_CPU_BASE = 0x0801_0000L;
    public static final long GIC_CPU_SIZE = 0x0001_0000L;
    /** PL011 UART. */
    public static final long UART_BASE = 0x0900_0000L;
    public static final long UART_SIZE = 0x0000_1000L;
    /**
     * The second PL011: the guest command's terminal ({@code ttyAMA1}), present only on boots that
     * run a command ({@code kpemu boot -- CMD}); at {@code virt}'s secure-UART address, which the
     * non-secure world never uses.
     */
    public static final long TERMINAL_UART_BASE = 0x0904_0000L;
    /** The PL011's interrupt: SPI 1 (GIC interrupt ID 33), {@code virt}'s. */
    public static final int UART_SPI = 1;
    public static final int UART_INTID = 32 + UART_SPI;
    /** The terminal PL011's interrupt (the second UART, on boots that run a command): SPI 2. */
    public static final int TERMINAL_UART_SPI = 2;
    public static final int TERMINAL_UART_INTID = 32 + TERMINAL_UART_SPI;
    /** Start of RAM; the kernel image and device tree go above it. */
    public static final long RAM_BASE = 0x4000_0000L;
    /** The largest RAM this map leaves room for (below the 256 GiB high-MMIO area of {@code virt}). */
    public static final long RAM_MAX_SIZE = 255L << 30;
    /** Name of the RAM region in {@link dev.kpemu.machine.GuestMemory}. */
    public static final String RAM_REGION = "ram";
}
