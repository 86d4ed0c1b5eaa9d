package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.GZIPOutputStream;

import org.junit.jupiter.api.Test;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.unicorn.Arm64Reg;

class Arm64LinuxLoaderTest {
    /** A synthetic Image: header (text_offset 0, image_size, flags LE/4K/anywhere) and some bytes. */
    static byte[] image(long imageSize, long flags) {
        byte[] d = new byte[0x3000];
        ByteBuffer b = ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0, 0x1400_0010);             // b +0x40
        b.putLong(8, 0);
        b.putLong(16, imageSize);
        b.putLong(24, flags);
        b.putInt(0x38, 0x644d5241);
        d[0x2fff] = 0x5a;
        return d;
    }

    @Test
    void followsTheArm64BootProtocol() throws Exception {
        try (Arm64Machine m = Arm64Machine.create(64L << 20)) {
            m.setReg(Arm64Reg.X1, 7);
            byte[] initrd = {1, 2, 3, 4, 5};
            Arm64LinuxLoader.Loaded l = Arm64LinuxLoader.load(m, image(0x20_0000, 0xa), "Image", initrd, "console=ttyAMA0");
            assertEquals(Arm64Layout.RAM_BASE + 0x20_0000, l.kernelBase(), "2 MiB aligned base + text_offset 0");
            assertEquals(l.kernelBase(), m.pc());
            assertEquals(l.dtbAddress(), m.reg(Arm64Reg.X0));
            assertEquals(0, l.dtbAddress() & 7, "device tree 8-byte aligned");
            assertEquals(0, m.reg(Arm64Reg.X1));
            assertEquals(0, m.reg(Arm64Reg.X2));
            assertEquals(0, m.reg(Arm64Reg.X3));
            assertEquals(Arm64Machine.PSTATE_EL1H_MASKED, m.pstate(), "EL1h, DAIF masked");
            assertEquals(0, m.sysReg(3, 0, 1, 0, 0) & 1, "MMU off");
            assertEquals(0x5a, m.memory().read(l.kernelBase() + 0x2fff, 1)[0]);
            assertEquals(0, l.initrd().start() % Arm64LinuxLoader.ALIGN_2M);
            assertEquals(l.initrd().start() + 5, l.initrd().end());
            assertArrayEquals(initrd, m.memory().read(l.initrd().start(), 5));
            Fdt dt = Fdt.parse(m.memory().read(l.dtbAddress(), l.dtbSize()));
            Fdt.Node chosen = dt.root().find("chosen").orElseThrow();
            assertEquals("console=ttyAMA0", chosen.string("bootargs"));
            assertEquals(l.initrd().start(), chosen.number("linux,initrd-start"));
            assertEquals(l.initrd().end(), chosen.number("linux,initrd-end"));
            // a seed for the kernel's CRNG, as QEMU's virt board gives (32 bytes), the same every boot
            assertEquals(32, chosen.properties().get("rng-seed").length);
            assertArrayEquals(chosen.properties().get("rng-seed"),
                    Fdt.parse(Arm64DeviceTree.build(64L << 20, 0, "x", null, false)).root().find("chosen").orElseThrow().properties().get("rng-seed"));
            assertEquals(64L << 20, dt.root().find("memory@40000000").orElseThrow().cells("reg")[3]);
        }
    }

    @Test
    void inflatesAGzipImage() throws Exception {
        ByteArrayOutputStream bo = new ByteArrayOutputStream();
        try (GZIPOutputStream z = new GZIPOutputStream(bo)) {
            z.write(image(0x20_0000, 0xa));
        }
        try (Arm64Machine m = Arm64Machine.create(16L << 20)) {
            Arm64LinuxLoader.Loaded l = Arm64LinuxLoader.load(m, bo.toByteArray(), "Image.gz", null, "x");
            assertEquals(0x5a, m.memory().read(l.kernelBase() + 0x2fff, 1)[0]);
            assertEquals(null, l.initrd());
        }
    }

    @Test
    void rejectsWhatCannotBoot() {
        try (Arm64Machine m = Arm64Machine.create(4L << 20)) {
            assertThrows(KernelImageException.class, () -> Arm64LinuxLoader.load(m, image(0x100_0000, 0xa), "big", null, ""), "too big for RAM");
            assertThrows(KernelImageException.class, () -> Arm64LinuxLoader.load(m, image(0x1_0000, 0xb), "be", null, ""), "big-endian");
            assertThrows(KernelImageException.class, () -> Arm64LinuxLoader.load(m, new byte[100], "junk", null, ""), "no magic");
        }
    }
}
