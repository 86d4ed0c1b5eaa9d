package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The device tree for N CPUs, as QEMU's {@code virt -smp N} writes it (hw/arm/virt.c
 * {@code fdt_add_cpu_nodes}, {@code fdt_add_timer_nodes}): {@code cpu@0} to {@code cpu@N-1} in
 * order, {@code reg} the MPIDR affinity (one cell while Aff3 is 0), {@code enable-method = "psci"},
 * and the GICv2 timer PPIs' CPU mask (interrupt specifier bits 15:8) with a bit per CPU.
 */
class Arm64DeviceTreeCpusTest {
    static final Arm64DeviceTree.Initrd INITRD = new Arm64DeviceTree.Initrd(0x4400_0000L, 0x4410_0000L);

    static String sha256(byte[] b) throws NoSuchAlgorithmException {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    @Test
    void oneCpuIsByteIdenticalToTheOneCpuTree() throws NoSuchAlgorithmException {
        // The blobs of the one-CPU builder before CPUs could be counted (commit f9f6878), recorded
        // from its build: length and SHA-256.
        byte[] a = Arm64DeviceTree.build(256L << 20, 0, "console=ttyAMA0", INITRD, false, 1);
        assertEquals(1458, a.length);
        assertEquals("ee76e4bf008f90c2df6d78adc7d9d26ea577cfc31aa011dd3520b4211633e52d", sha256(a));
        byte[] b = Arm64DeviceTree.build(512L << 20, 8L << 20, "console=ttyAMA0 quiet", null, true, 1);
        assertEquals(1773, b.length);
        assertEquals("c2dc263eaba6655642440a837fcd236dd89d611e73def9673d35daec3387ffe6", sha256(b));
        assertArrayEquals(a, Arm64DeviceTree.build(256L << 20, "console=ttyAMA0", INITRD), "the old entry point: one CPU");
    }

    @Test
    void nCpusGetNodesWithTheirAffinityAndTheTimerNamesThemAll() {
        for (int n : new int[] {2, 4, 8}) {
            Fdt.Node r = Fdt.parse(Arm64DeviceTree.build(256L << 20, 0, "x", null, false, n)).root();
            Fdt.Node cpus = r.find("cpus").orElseThrow();
            assertArrayEquals(new int[] {1}, cpus.cells("#address-cells"));
            assertArrayEquals(new int[] {0}, cpus.cells("#size-cells"));
            assertEquals(n, cpus.children().size());
            for (int i = 0; i < n; i++) {
                Fdt.Node cpu = cpus.children().get(i);
                assertEquals("cpu@" + i, cpu.name(), "in order");
                assertEquals("cpu", cpu.string("device_type"));
                assertEquals("arm,cortex-a57", cpu.string("compatible"));
                assertEquals("psci", cpu.string("enable-method"));
                assertArrayEquals(new int[] {i}, cpu.cells("reg"), "Aff0 = i (fewer than 8 per cluster)");
            }
            int flags = ((1 << n) - 1) << 8 | 4;       // CPU mask, level-high
            assertArrayEquals(new int[] {1, 13, flags, 1, 14, flags, 1, 11, flags, 1, 10, flags},
                    r.find("timer").orElseThrow().cells("interrupts"), n + " CPUs");
        }
        assertEquals(0xff04, Fdt.parse(Arm64DeviceTree.build(1L << 28, 0, "x", null, false, 8)).root()
                .find("timer").orElseThrow().cells("interrupts")[2], "8 CPUs: mask 0xff");
        assertEquals(List.of("cpu@0"), Fdt.parse(Arm64DeviceTree.build(1L << 28, 0, "x", null, false, 1)).root()
                .find("cpus").orElseThrow().children().stream().map(Fdt.Node::name).toList());
        assertThrows(IllegalArgumentException.class, () -> Arm64DeviceTree.build(1L << 28, 0, "x", null, false, 0));
        assertThrows(IllegalArgumentException.class, () -> Arm64DeviceTree.build(1L << 28, 0, "x", null, false, 9));
    }
}
