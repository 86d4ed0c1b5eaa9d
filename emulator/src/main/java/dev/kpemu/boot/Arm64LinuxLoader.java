package dev.kpemu.boot;

import dev.kpemu.image.Arm64Image;
import dev.kpemu.image.KernelFiles;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.OnDemandFileBytes;
import dev.kpemu.machine.MemoryRegion;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.board.Arm64Board;
import dev.kpemu.machine.arm64.devices.Pl011;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * Loads an arm64 Linux kernel the way Documentation/arch/arm64/booting.rst asks a boot loader
 * to: the raw {@code Image} (header checked by {@link Arm64Image}; an {@code Image.gz} or EFI
 * zboot file is unpacked first by {@link KernelFiles}) at a 2 MiB aligned base plus text_offset, the device tree 8-byte aligned and
 * under 2 MiB, the initrd in RAM and described in {@code /chosen}; then x0 = the device tree's
 * physical address, x1-x3 = 0, MMU and caches off, EL1h with DAIF masked, PC = the Image's
 * first byte.
 *
 * <p>Placement in RAM (base {@link Arm64Layout#RAM_BASE}): the device tree at the start of RAM,
 * the kernel at the first 2 MiB boundary above it, the initrd at the first 2 MiB boundary past
 * the kernel's image_size (its BSS and early page tables).
 *
 * <p>The device tree lists one {@code cpu@i} node per vCPU of the machine ({@code m.cpuCount()}:
 * an {@link Arm64Board} of N PEs has them all before the load); the boot registers are vCPU 0's,
 * the others wait for PSCI CPU_ON.
 */
public final class Arm64LinuxLoader {
    public static final long ALIGN_2M = 2L << 20;
    public static final long DTB_MAX = 2L << 20;
    /** How much of an Image is read to parse its headers (the arm64 header and the EFI stub's PE header and section table). */
    static final int HEADERS_READ = 64 << 10;
    /** The default command line: PL011 console, no KASLR (no seed is given either). */
    public static final String DEFAULT_CMDLINE = "console=ttyAMA0 earlycon=pl011,0x" + Long.toHexString(Arm64Layout.UART_BASE) + " nokaslr";

    private Arm64LinuxLoader() {}

    /** What was placed where. */
    public record Loaded(Arm64Image header, long kernelBase, long kernelEnd, long dtbAddress, int dtbSize,
                         Arm64DeviceTree.Initrd initrd, String cmdline) {
        public long entry() { return kernelBase; }
    }

    /**
     * Loads kernel, initrd (may be null) and a generated device tree into {@code m} and sets the
     * boot registers.
     */
    public static Loaded load(Arm64Machine m, byte[] kernel, String kernelName, byte[] initrd, String cmdline) throws KernelImageException {
        return load(m, kernel, kernelName, initrd, cmdline, m.memory().region(Arm64Layout.RAM_REGION).size());
    }

    /**
     * As {@link #load(Arm64Machine, byte[], String, byte[], String)}, with the RAM after the first
     * {@code guestRamBytes} kept for the host: reserved in the device tree (mapped, never allocated).
     */
    public static Loaded load(Arm64Machine m, byte[] kernel, String kernelName, byte[] initrd, String cmdline, long guestRamBytes)
            throws KernelImageException {
        return load(m, kernel, kernelName, initrd, cmdline, guestRamBytes, false);
    }

    /** As above; {@code terminalUart}: the device tree lists the board's second PL011 ({@link Arm64Board#create(long, Pl011.Sink, Pl011.Sink)}). */
    public static Loaded load(Arm64Machine m, byte[] kernel, String kernelName, byte[] initrd, String cmdline, long guestRamBytes,
                              boolean terminalUart) throws KernelImageException {
        return load(m, kernel, kernelName, initrd, cmdline, guestRamBytes, terminalUart, true);
    }

    /**
     * As above; {@code writeImages} false: the kernel and the initrd are placed but not written
     * (the RAM's contents come from a snapshot restored next, which overwrites or zeroes every
     * such page).
     */
    static Loaded load(Arm64Machine m, byte[] kernel, String kernelName, byte[] initrd, String cmdline, long guestRamBytes,
                       boolean terminalUart, boolean writeImages) throws KernelImageException {
        return load(m, OnDemandFileBytes.inMemory(KernelFiles.arm64Image(kernel, kernelName), kernelName), kernelName, initrd, cmdline,
                guestRamBytes, terminalUart, writeImages);
    }

    /** As above, the raw Image read as it is copied into RAM ({@link KernelFiles#arm64Image(java.nio.file.Path)}). */
    static Loaded load(Arm64Machine m, OnDemandFileBytes image, String kernelName, byte[] initrd, String cmdline, long guestRamBytes,
                       boolean terminalUart, boolean writeImages) throws KernelImageException {
        Arm64Image h = Arm64Image.parse(image.head(HEADERS_READ), image.length(), kernelName);
        if (h.bigEndian()) throw new KernelImageException(kernelName + ": a big-endian kernel cannot run on this little-endian machine");
        if (h.pageSize() != 0 && h.pageSize() != 4096 && h.pageSize() != 16384 && h.pageSize() != 65536) {
            throw new KernelImageException(kernelName + ": unsupported page size");
        }
        MemoryRegion ram = m.memory().region(Arm64Layout.RAM_REGION);
        if (guestRamBytes <= 0 || guestRamBytes > ram.size()) throw new IllegalArgumentException("guest RAM outside the machine's RAM");
        long ramEnd = ram.base() + guestRamBytes;
        long base = h.loadAddress(ram.base() + ALIGN_2M);       // keep the first 2 MiB for the device tree
        long kernelEnd = base + Math.max(h.effectiveSize(), image.length());
        if (kernelEnd > ramEnd) {
            throw new KernelImageException(kernelName + ": the kernel needs 0x" + Long.toHexString(kernelEnd - ram.base())
                    + " bytes of RAM, the guest has 0x" + Long.toHexString(guestRamBytes));
        }
        if (writeImages) image.copyRange(0, image.length(), (at, chunk, from, n) -> m.memory().write(base + at, chunk, from, n));

        Arm64DeviceTree.Initrd rd = null;
        if (initrd != null) {
            long start = (kernelEnd + ALIGN_2M - 1) & ~(ALIGN_2M - 1);
            long end = start + initrd.length;
            if (end > ramEnd) throw new KernelImageException("the initrd (" + initrd.length + " bytes) does not fit in RAM after the kernel");
            if (writeImages) m.memory().write(start, initrd);
            rd = new Arm64DeviceTree.Initrd(start, end);
        }

        byte[] dtb = Arm64DeviceTree.build(guestRamBytes, ram.size() - guestRamBytes, cmdline, rd, terminalUart, m.cpuCount());
        if (dtb.length > DTB_MAX) throw new IllegalStateException("device tree larger than 2 MiB");
        long dtbAddr = ram.base();
        m.memory().write(dtbAddr, dtb);

        m.setReg(Arm64Reg.X0, dtbAddr);
        m.setReg(Arm64Reg.X1, 0);
        m.setReg(Arm64Reg.X2, 0);
        m.setReg(Arm64Reg.X3, 0);
        m.setPstate(Arm64Machine.PSTATE_EL1H_MASKED);
        m.setPc(base);
        return new Loaded(h, base, kernelEnd, dtbAddr, dtb.length, rd, cmdline);
    }
}
