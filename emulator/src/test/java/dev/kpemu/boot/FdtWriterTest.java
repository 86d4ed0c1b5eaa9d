package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.arm64.Arm64Layout;

class FdtWriterTest {
    @Test
    void headerBlocksAndTokensFollowTheSpecification() {
        byte[] dtb = new FdtWriter().reserve(0x1000, 0x2000).bootCpu(0)
                .beginNode("").property("compatible", "a,b").propertyU32("#size-cells", 2)
                .beginNode("child@1").property("flag").propertyU64("reg", 0x4000_0000L, 0x100).endNode()
                .endNode().finish();
        ByteBuffer b = ByteBuffer.wrap(dtb);
        assertEquals(0xd00dfeed, b.getInt(0), "magic");
        assertEquals(dtb.length, b.getInt(4), "totalsize");
        int structOff = b.getInt(8), stringsOff = b.getInt(12), rsvOff = b.getInt(16);
        assertEquals(17, b.getInt(20), "version");
        assertEquals(16, b.getInt(24), "last compatible version");
        assertEquals(0, rsvOff % 8, "reservation map 8-byte aligned");
        assertEquals(0, structOff % 4, "structure block 4-byte aligned");
        assertEquals(0x1000, b.getLong(rsvOff));
        assertEquals(0x2000, b.getLong(rsvOff + 8));
        assertEquals(0, b.getLong(rsvOff + 16), "reservation map terminator");
        assertEquals(structOff + b.getInt(36), stringsOff, "strings follow the structure block");
        assertEquals(FdtWriter.FDT_BEGIN_NODE, b.getInt(structOff));
        assertEquals(0, b.getInt(structOff + 4), "root name is empty (padded)");
        assertEquals(FdtWriter.FDT_PROP, b.getInt(structOff + 8));
        assertEquals(4, b.getInt(structOff + 12), "\"a,b\\0\" is 4 bytes");
        assertEquals(FdtWriter.FDT_END, b.getInt(stringsOff - 4), "structure block ends with FDT_END");
        String strings = new String(dtb, stringsOff, b.getInt(32));
        assertEquals("compatible\0#size-cells\0flag\0reg\0", strings, "each name once");
    }

    @Test
    void parsesBackWhatItWrote() {
        byte[] dtb = new FdtWriter()
                .beginNode("").property("compatible", "x", "y")
                .beginNode("a").propertyU32("cells", 1, 2, 3).property("empty").endNode()
                .beginNode("b@9").property("compatible", "z").propertyU64("v", 0x1234_5678_9abcL).endNode()
                .endNode().finish();
        Fdt f = Fdt.parse(dtb);
        assertEquals(17, f.version());
        assertEquals(List.of("x", "y"), f.root().strings("compatible"));
        assertArrayEquals(new int[] {1, 2, 3}, f.root().find("a").orElseThrow().cells("cells"));
        assertTrue(f.root().find("a").orElseThrow().has("empty"));
        assertEquals(0x1234_5678_9abcL, f.root().find("b@9").orElseThrow().number("v"));
        assertEquals(List.of("a", "b@9"), f.root().children().stream().map(Fdt.Node::name).toList());
    }

    @Test
    void misuseIsRejected() {
        assertThrows(IllegalStateException.class, () -> new FdtWriter().beginNode("").finish(), "open node");
        assertThrows(IllegalStateException.class, () -> new FdtWriter().beginNode("x"), "root must be unnamed");
        assertThrows(IllegalArgumentException.class, () -> Fdt.parse(new byte[64]), "bad magic");
    }

    @Test
    void machineTreeDescribesTheBoard() {
        byte[] dtb = Arm64DeviceTree.build(256L << 20, "console=ttyAMA0", new Arm64DeviceTree.Initrd(0x4400_0000L, 0x4410_0000L));
        Fdt.Node r = Fdt.parse(dtb).root();
        assertEquals("linux,dummy-virt", r.string("compatible"));
        assertArrayEquals(new int[] {2}, r.cells("#address-cells"));
        Fdt.Node mem = r.find("memory@40000000").orElseThrow();
        assertArrayEquals(new int[] {0, 0x4000_0000, 0, 0x1000_0000}, mem.cells("reg"));
        Fdt.Node cpu = r.find("cpus/cpu@0").orElseThrow();
        assertEquals("arm,cortex-a57", cpu.string("compatible"));
        assertEquals("psci", cpu.string("enable-method"));
        assertEquals("hvc", r.find("psci").orElseThrow().string("method"));
        Fdt.Node gic = r.find("intc@8000000").orElseThrow();
        assertEquals("arm,cortex-a15-gic", gic.string("compatible"));
        assertTrue(gic.has("interrupt-controller"));
        assertArrayEquals(new int[] {0, 0x0800_0000, 0, 0x1_0000, 0, 0x0801_0000, 0, 0x1_0000}, gic.cells("reg"));
        assertEquals(Arm64DeviceTree.PHANDLE_GIC, r.cells("interrupt-parent")[0]);
        assertEquals(Arm64DeviceTree.PHANDLE_GIC, gic.cells("phandle")[0]);
        assertArrayEquals(new int[] {1, 13, 0x104, 1, 14, 0x104, 1, 11, 0x104, 1, 10, 0x104},
                r.find("timer").orElseThrow().cells("interrupts"), "timer PPIs 13 14 11 10");
        Fdt.Node uart = r.find("pl011@9000000").orElseThrow();
        assertEquals(List.of("arm,pl011", "arm,primecell"), uart.strings("compatible"));
        assertArrayEquals(new int[] {0, 1, 4}, uart.cells("interrupts"));
        assertEquals(List.of("uartclk", "apb_pclk"), uart.strings("clock-names"));
        assertEquals(24_000_000, r.find("apb-pclk").orElseThrow().cells("clock-frequency")[0]);
        Fdt.Node chosen = r.find("chosen").orElseThrow();
        assertEquals("console=ttyAMA0", chosen.string("bootargs"));
        assertEquals("/pl011@9000000", chosen.string("stdout-path"));
        assertEquals(0x4400_0000L, chosen.number("linux,initrd-start"));
        assertEquals(0x4410_0000L, chosen.number("linux,initrd-end"));
        assertEquals(Arm64Layout.UART_BASE, 0x0900_0000L);
    }
}
