package dev.kpemu.boot;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.image.BzImage;
import dev.kpemu.image.ElfImage;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.x86.X86Layout;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.unicorn.X86Reg;

/**
 * Linux's x86 64-bit boot protocol (Documentation/arch/x86/boot.rst, "64-bit Boot Protocol"):
 * loads the ELF vmlinux (extracted from the bzImage) at its physical addresses, fills struct
 * boot_params with the bzImage's setup header, the e820 map, the command line and the initrd,
 * and enters {@code startup_64} in long mode with identity page tables, a GDT holding
 * __BOOT_CS/__BOOT_DS, interrupts off and RSI = boot_params.
 */
public final class X86LinuxLoader {
    // struct boot_params offsets
    static final int BP_ACPI_RSDP_ADDR = 0x070, BP_EXT_RAMDISK_IMAGE = 0x0c0, BP_EXT_RAMDISK_SIZE = 0x0c4,
            BP_EXT_CMD_LINE_PTR = 0x0c8, BP_E820_ENTRIES = 0x1e8, BP_HDR = 0x1f1, BP_E820_TABLE = 0x2d0;
    // setup header offsets (within boot_params / the bzImage)
    static final int HDR_SETUP_SECTS = 0x1f1, HDR_BOOT_FLAG = 0x1fe, HDR_JUMP = 0x200, HDR_HEADER = 0x202,
            HDR_VERSION = 0x206, HDR_TYPE_OF_LOADER = 0x210, HDR_LOADFLAGS = 0x211, HDR_RAMDISK_IMAGE = 0x218,
            HDR_RAMDISK_SIZE = 0x21c, HDR_CMD_LINE_PTR = 0x228, HDR_INITRD_ADDR_MAX = 0x22c, HDR_CMDLINE_SIZE = 0x238,
            HDR_HARDWARE_SUBARCH = 0x23c;
    static final int LOADFLAGS_LOADED_HIGH = 0x01, LOADFLAGS_CAN_USE_HEAP = 0x80;
    static final int TYPE_OF_LOADER_UNDEFINED = 0xff;
    static final int HDRS_MAGIC = 0x5372_6448; // "HdrS"
    /** The I/O APIC's, HPET's and local APIC's window up to 4 GiB: reserved in the e820 map when RAM reaches it. */
    static final long MMIO_HOLE_START = 0xfec0_0000L;
    /** The boot page tables identity-map guest RAM up to here (4 GiB). */
    static final long IDENTITY_MAP_LIMIT = 4L << 30;
    public static final int E820_RAM = 1, E820_RESERVED = 2, E820_ACPI = 3;
    static final int E820_MAX = 128;

    public record E820Entry(long base, long size, int type) {}

    /** What was loaded where. */
    public record Loaded(ElfImage vmlinux, long entry, long bootParams, long initrdBase, long initrdSize,
                         String cmdline, List<E820Entry> e820, int protocolVersion) {}

    private X86LinuxLoader() {}

    /** Reads a bzImage (as Debian ships it) or an ELF vmlinux. */
    public static KernelFile readKernel(Path kernel) throws KernelImageException {
        return readKernel(kernel, null);
    }

    /**
     * Like {@link #readKernel(Path)}, keeping the vmlinux extracted from a bzImage in
     * {@code cacheDir} (named by the bzImage's SHA-256) so later boots skip the XZ
     * decompression (about 1.5 s for Debian's kernel).
     */
    public static KernelFile readKernel(Path kernel, Path cacheDir) throws KernelImageException {
        if (cacheDir == null) return readKernelUncached(kernel);
        byte[] data;
        try {
            data = dev.kpemu.image.FileBytes.read(kernel);
        } catch (java.io.IOException e) {
            throw new KernelImageException("cannot read kernel " + kernel + ": " + e.getMessage(), e);
        }
        if (data.length > 4 && data[0] == 0x7f && data[1] == 'E') return readKernelUncached(kernel);
        BzImage bz = BzImage.parse(data, kernel.getFileName().toString());
        if (!bz.has64BitEntry()) throw new KernelImageException(kernel + ": bzImage has no 64-bit entry (XLF_KERNEL_64)");
        String sha;
        try {
            sha = dev.kpemu.image.FileDigests.sha256(kernel, BootRunner.digestCacheDir());
        } catch (java.io.IOException e) {
            sha = dev.kpemu.image.FileDigests.sha256Hex(data);
        }
        Path cached = cacheDir.resolve("vmlinux-" + sha.substring(0, 32));
        try {
            if (Files.isRegularFile(cached) && Files.size(cached) == bz.trailerSize()) {
                return new KernelFile(bz, ElfImage.read(cached));
            }
            byte[] elf = bz.extractVmlinux();
            Files.createDirectories(cacheDir);
            Path tmp = Files.createTempFile(cacheDir, "vmlinux-", ".tmp");
            Files.write(tmp, elf);
            Files.move(tmp, cached, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            return new KernelFile(bz, ElfImage.parse(elf, bz.name() + "!vmlinux"));
        } catch (java.io.IOException e) {
            return new KernelFile(bz, bz.vmlinux()); // an unwritable cache only costs time
        }
    }

    private static KernelFile readKernelUncached(Path kernel) throws KernelImageException {
        if (startsWithElfMagic(kernel)) return new KernelFile(null, ElfImage.read(kernel));
        byte[] data;
        try {
            data = dev.kpemu.image.FileBytes.read(kernel);
        } catch (java.io.IOException e) {
            throw new KernelImageException("cannot read kernel " + kernel + ": " + e.getMessage(), e);
        }
        if (data.length > 4 && data[0] == 0x7f && data[1] == 'E' && data[2] == 'L' && data[3] == 'F') {
            return new KernelFile(null, ElfImage.parse(data, kernel.getFileName().toString()));
        }
        BzImage bz = BzImage.parse(data, kernel.getFileName().toString());
        if (!bz.has64BitEntry()) throw new KernelImageException(kernel + ": bzImage has no 64-bit entry (XLF_KERNEL_64)");
        return new KernelFile(bz, bz.vmlinux());
    }

    private static boolean startsWithElfMagic(Path file) {
        try (var in = Files.newInputStream(file)) {
            byte[] m = in.readNBytes(4);
            return m.length == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
        } catch (java.io.IOException e) {
            return false;   // read whole below, for the one-line error
        }
    }

    /** A kernel: the bzImage (null for a bare vmlinux) and its ELF vmlinux. */
    public record KernelFile(BzImage bzImage, ElfImage vmlinux) {}

    /** Loads {@code kernel} and {@code initrd} (may be null) into {@code m} and sets up the CPU for the 64-bit entry. */
    public static Loaded load(X86Machine m, KernelFile kernel, byte[] initrd, String cmdline, long ramBytes, long acpiRsdp)
            throws KernelImageException {
        return load(m, kernel, initrd, cmdline, ramBytes, acpiRsdp, true);
    }

    /**
     * As above; {@code writeImages} false: the kernel's segments and the initrd are placed but not
     * written (the RAM's contents come from a snapshot restored next: writing them cost a restored
     * session ~50 ms of CPU, and the snapshot overwrites or zeroes every such page).
     */
    static Loaded load(X86Machine m, KernelFile kernel, byte[] initrd, String cmdline, long ramBytes, long acpiRsdp, boolean writeImages)
            throws KernelImageException {
        GuestMemory mem = m.memory();
        ElfImage elf = kernel.vmlinux();
        if (elf.machine() != ElfImage.EM_X86_64) throw new KernelImageException(elf.name() + ": not an x86-64 ELF");
        long kernelEnd = 0;
        for (ElfImage.Segment s : elf.loadSegments()) {
            if (s.paddr() < X86Layout.HIGH_RAM_START || s.paddr() + s.memsz() > ramBytes) {
                throw new KernelImageException(String.format("%s: segment at 0x%x+0x%x does not fit in %d MiB of RAM", elf.name(), s.paddr(), s.memsz(), ramBytes >> 20));
            }
            if (writeImages) {
                elf.copyFileRange(s.offset(), s.filesz(), (at, chunk, from, n) -> mem.write(s.paddr() + (at - s.offset()), chunk, from, n));
                if (s.memsz() > s.filesz()) mem.write(s.paddr() + s.filesz(), new byte[(int) (s.memsz() - s.filesz())]);
            }
            kernelEnd = Math.max(kernelEnd, s.paddr() + s.memsz());
        }

        // boot_params: zeroed, then the setup header as the bzImage carries it
        byte[] zp = new byte[4096];
        ByteBuffer bp = ByteBuffer.wrap(zp).order(ByteOrder.LITTLE_ENDIAN);
        int version;
        long initrdAddrMax = 0x7fff_ffffL;
        if (kernel.bzImage() != null) {
            byte[] setup = kernel.bzImage().setupBytes();
            int hdrEnd = HDR_JUMP + 2 + (setup[HDR_JUMP + 1] & 0xff); // the jump at 0x200 skips the header
            System.arraycopy(setup, BP_HDR, zp, BP_HDR, Math.min(hdrEnd, setup.length) - BP_HDR);
            version = bp.getShort(HDR_VERSION) & 0xffff;
            if (version >= 0x0203) initrdAddrMax = Integer.toUnsignedLong(bp.getInt(HDR_INITRD_ADDR_MAX));
        } else {
            version = 0x020f; // a bare vmlinux: describe ourselves as a modern loader
            bp.putShort(HDR_BOOT_FLAG, (short) 0xaa55);
            bp.putInt(HDR_HEADER, HDRS_MAGIC);
            bp.putShort(HDR_VERSION, (short) version);
            bp.putInt(HDR_CMDLINE_SIZE, X86Layout.CMDLINE_MAX - 1);
        }
        if (version < 0x020c) throw new KernelImageException("boot protocol " + Integer.toHexString(version) + " too old for the 64-bit entry (needs 2.12)");
        zp[HDR_TYPE_OF_LOADER] = (byte) TYPE_OF_LOADER_UNDEFINED;
        zp[HDR_LOADFLAGS] |= LOADFLAGS_LOADED_HIGH;
        bp.putInt(HDR_HARDWARE_SUBARCH, 0); // X86_SUBARCH_PC

        // command line
        byte[] cl = (cmdline + "\0").getBytes(StandardCharsets.US_ASCII);
        long cmdlineMax = version >= 0x0206 ? Integer.toUnsignedLong(bp.getInt(HDR_CMDLINE_SIZE)) : 255;
        if (cl.length - 1 > Math.min(cmdlineMax, X86Layout.CMDLINE_MAX - 1)) {
            throw new KernelImageException("command line is " + (cl.length - 1) + " bytes; the kernel takes at most " + cmdlineMax);
        }
        mem.write(X86Layout.CMDLINE, cl);
        bp.putInt(HDR_CMD_LINE_PTR, (int) X86Layout.CMDLINE);
        bp.putInt(BP_EXT_CMD_LINE_PTR, 0);

        // initrd: at the top of RAM below initrd_addr_max
        long initrdBase = 0, initrdSize = 0;
        if (initrd != null && initrd.length > 0) {
            initrdSize = initrd.length;
            long top = Math.min(ramBytes, initrdAddrMax + 1);
            initrdBase = (top - initrdSize) & ~(X86Layout.INITRD_ALIGN - 1);
            if (initrdBase < kernelEnd) throw new KernelImageException("initrd of " + initrdSize + " bytes does not fit above the kernel; give the guest more memory");
            if (writeImages) mem.write(initrdBase, initrd);
            bp.putInt(HDR_RAMDISK_IMAGE, (int) initrdBase);
            bp.putInt(HDR_RAMDISK_SIZE, (int) initrdSize);
            bp.putInt(BP_EXT_RAMDISK_IMAGE, (int) (initrdBase >>> 32));
            bp.putInt(BP_EXT_RAMDISK_SIZE, (int) (initrdSize >>> 32));
        }

        // e820
        List<E820Entry> e820 = new ArrayList<>();
        e820.add(new E820Entry(0, X86Layout.LOW_RAM_END, E820_RAM));
        e820.add(new E820Entry(X86Layout.LOW_RAM_END, 0xa0000 - X86Layout.LOW_RAM_END, E820_RESERVED));
        e820.add(new E820Entry(X86Layout.ACPI_BASE, X86Layout.ACPI_SIZE, E820_RESERVED));
        if (ramBytes <= MMIO_HOLE_START) {
            e820.add(new E820Entry(X86Layout.HIGH_RAM_START, ramBytes - X86Layout.HIGH_RAM_START, E820_RAM));
        } else {
            // RAM runs through the APICs' (and an HPET's) window below 4 GiB: reserved, so Linux puts
            // nothing there that a device's registers would shadow (as a PC's firmware reserves it)
            e820.add(new E820Entry(X86Layout.HIGH_RAM_START, MMIO_HOLE_START - X86Layout.HIGH_RAM_START, E820_RAM));
            e820.add(new E820Entry(MMIO_HOLE_START, Math.min(ramBytes, 1L << 32) - MMIO_HOLE_START, E820_RESERVED));
            if (ramBytes > 1L << 32) e820.add(new E820Entry(1L << 32, ramBytes - (1L << 32), E820_RAM));
        }
        zp[BP_E820_ENTRIES] = (byte) e820.size();
        for (int i = 0; i < e820.size(); i++) {
            E820Entry e = e820.get(i);
            bp.putLong(BP_E820_TABLE + 20 * i, e.base());
            bp.putLong(BP_E820_TABLE + 20 * i + 8, e.size());
            bp.putInt(BP_E820_TABLE + 20 * i + 16, e.type());
        }
        if (acpiRsdp != 0) bp.putLong(BP_ACPI_RSDP_ADDR, acpiRsdp);
        mem.write(X86Layout.ZERO_PAGE, zp);

        // CPU: long mode, identity map of the RAM below 4 GiB (what the boot protocol asks: the
        // kernel, boot_params, the command line and the initrd all lie there), boot GDT, RSI =
        // boot_params. The tables take a page per GiB from BOOT_PML4 up; mapping all of a larger
        // RAM ran them over the command line at CMDLINE (from 21 GiB on: the kernel then booted
        // without console=ttyS0, an empty console).
        int gdtLimit = X86LongMode.writeGdt(mem, X86Layout.BOOT_GDT);
        long tablesEnd = X86LongMode.identityMap(mem, X86Layout.BOOT_PML4, Math.min(Math.max(ramBytes, 1L << 30), IDENTITY_MAP_LIMIT));
        if (tablesEnd > X86Layout.CMDLINE) throw new IllegalStateException("boot page tables overrun the command line");
        var uc = m.engine();
        X86LongMode.enter(uc, X86Layout.BOOT_GDT, gdtLimit, X86Layout.BOOT_PML4);
        uc.flushTlb();
        uc.regWrite(X86Reg.RSI, X86Layout.ZERO_PAGE);
        uc.regWrite(X86Reg.RSP, X86Layout.BOOT_STACK_TOP);
        uc.regWrite(X86Reg.RFLAGS, 0x2);
        long entry = elf.entry();
        m.setPc(entry);
        return new Loaded(elf, entry, X86Layout.ZERO_PAGE, initrdBase, initrdSize, cmdline, List.copyOf(e820), version);
    }
}
