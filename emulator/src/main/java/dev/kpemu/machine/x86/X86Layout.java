package dev.kpemu.machine.x86;

/**
 * The guest-physical memory map of kpemu's x86-64 PC and where the boot loader puts things.
 * RAM starts at 0 and is one region; the e820 map tells the kernel which parts it may use.
 */
public final class X86Layout {
    private X86Layout() {}

    /** Boot GDT (null, null, __BOOT_CS 0x10, __BOOT_DS 0x18). */
    public static final long BOOT_GDT = 0x0500;
    /** struct boot_params (the "zero page"). */
    public static final long ZERO_PAGE = 0x7000;
    /** Identity-mapping page tables for the 64-bit entry (PML4, PDPT, one PD per GiB). */
    public static final long BOOT_PML4 = 0x9000;
    /** Initial stack top (the kernel switches to its own stack at once). */
    public static final long BOOT_STACK_TOP = 0x8ff0;
    /** Kernel command line. */
    public static final long CMDLINE = 0x20000;
    public static final int CMDLINE_MAX = 4096;
    /** End of conventional low memory the kernel may use; [LOW_RAM_END, 1 MiB) is reserved. */
    public static final long LOW_RAM_END = 0x9fc00;
    /** The BIOS area holding the ACPI RSDP and tables (reserved in e820). */
    public static final long ACPI_BASE = 0xe0000, ACPI_SIZE = 0x20000;
    public static final long HIGH_RAM_START = 0x10_0000;
    /** Where RAM may hold an initrd at most (kept below 4 GiB, the 32-bit ramdisk_image field). */
    public static final long INITRD_ALIGN = 0x1000;

    // ---- ISA I/O ports and IRQs
    public static final int IRQ_PIT = 0, IRQ_COM2 = 3, IRQ_COM1 = 4, IRQ_SCI = 9, IRQ_RTC = 8;
    /** ACPI fixed-hardware blocks (PM1a event, PM1a control, PM timer) in I/O space. */
    public static final int ACPI_PM1A_EVT = 0x600, ACPI_PM1A_CNT = 0x604, ACPI_PM_TMR = 0x608, ACPI_PM_PORTS = 12;
}
