package dev.kpemu.machine.arm64;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * PSCI's CPU power functions (ARM DEN 0022D: CPU_ON 5.6, CPU_OFF 5.5, AFFINITY_INFO 5.7,
 * PSCI_FEATURES 5.15; return codes table 5.2.2) through the guest's HVC, as QEMU's firmware
 * emulation answers them. Return codes: SUCCESS 0, NOT_SUPPORTED -1, INVALID_PARAMETERS -2,
 * ALREADY_ON -4, ON_PENDING -5; AFFINITY_INFO: ON 0, OFF 1, ON_PENDING 2.
 */
class PsciTest {
    static final long RAM = Arm64Layout.RAM_BASE;
    /** One call: x0-x3 set by the test, the result kept in x20, then SYSTEM_OFF. */
    static final String CALL = """
            hvc #0
            mov x20, x0
            movz x0, #0x8400, lsl #16
            movk x0, #8
            hvc #0
            b .
            """;

    record Request(String what, int pe, long entry, long context) {}

    /** Records what PSCI asks of the machine. */
    static final class Recorder implements Psci.CpuControl {
        final List<Request> requests = new ArrayList<>();

        @Override public void cpuOn(int pe, long entry, long contextId) { requests.add(new Request("on", pe, entry, contextId)); }

        @Override public void cpuOff(int pe) { requests.add(new Request("off", pe, 0, 0)); }
    }

    static final class Rig implements AutoCloseable {
        final Arm64Machine m = Arm64Machine.create(16L << 20);
        final Recorder control = new Recorder();
        final int[] caller = {0};
        final Psci psci;

        Rig(int pes) {
            psci = new Psci(pes, control, () -> caller[0]);
            m.setHypercallHandler(psci);
            m.memory().write(RAM, Asm.arm64(CALL, 0));
        }

        long call(long fn, long... args) {
            m.setReg(Arm64Reg.X0, fn);
            for (int i = 0; i < 3; i++) m.setReg(Arm64Reg.X1 + i, i < args.length ? args[i] : 0);
            m.setPc(RAM);
            assertInstanceOf(StopReason.PoweredOff.class, m.run(1_000));
            return m.reg(Arm64Reg.X20);
        }

        @Override public void close() { m.close(); }
    }

    static final long ENTRY = RAM + 0x2000;

    @Test
    void cpuOnReturnCodesAndTheRequestToTheMachine() {
        try (Rig r = new Rig(4)) {
            assertEquals(1, r.call(Psci.AFFINITY_INFO_64, 1, 0), "PE 1 starts off");
            assertEquals(0, r.call(Psci.AFFINITY_INFO_64, 0, 0), "the boot PE is on");
            assertEquals(0, r.call(Psci.CPU_ON_64, 1, ENTRY, 0xc0ffee), "SUCCESS");
            assertEquals(List.of(new Request("on", 1, ENTRY, 0xc0ffee)), r.control.requests);
            assertEquals(2, r.call(Psci.AFFINITY_INFO_64, 1, 0), "ON_PENDING until the machine has started it");
            assertEquals(-5, r.call(Psci.CPU_ON_64, 1, ENTRY, 0), "ON_PENDING");
            assertEquals(RAM + 0x2000, r.psci.pendingEntry(1));
            assertEquals(0xc0ffee, r.psci.pendingContextId(1));
            r.psci.started(1);
            assertEquals(0, r.call(Psci.AFFINITY_INFO_64, 1, 0), "ON");
            assertEquals(-4, r.call(Psci.CPU_ON_64, 1, ENTRY, 0), "ALREADY_ON");
            assertEquals(-4, r.call(Psci.CPU_ON_64, 0, ENTRY, 0), "the caller itself: ALREADY_ON");
            assertEquals(1, r.control.requests.size(), "refused calls ask nothing of the machine");
            assertThrows(IllegalStateException.class, () -> r.psci.started(1), "not being started");
        }
    }

    @Test
    void cpuOnInvalidParameters() {
        try (Rig r = new Rig(2)) {
            assertEquals(-2, r.call(Psci.CPU_ON_64, 2, ENTRY, 0), "no PE with affinity 2 on a 2-PE machine");
            assertEquals(-2, r.call(Psci.CPU_ON_64, 0x100, ENTRY, 0), "Aff1 = 1: no such cluster");
            assertEquals(-2, r.call(Psci.CPU_ON_64, 1L << 31 | 1, ENTRY, 0), "bits 31:24 must be zero");
            assertEquals(-2, r.call(Psci.CPU_ON_64, 1, ENTRY + 2, 0), "entry not 4-byte aligned (QEMU's answer)");
            assertEquals(1, r.call(Psci.AFFINITY_INFO_64, 1, 0), "still off");
            assertEquals(List.of(), r.control.requests);
            // SMC32/HVC32 calls use the registers' low 32 bits (SMC Calling Convention).
            assertEquals(0, r.call(Psci.CPU_ON_32, 0xdead_0000_0000_0001L, 0xffff_ffff_4000_3000L, 0x1_0000_0007L));
            assertEquals(List.of(new Request("on", 1, 0x4000_3000L, 7)), r.control.requests);
        }
    }

    @Test
    void cpuOffStopsTheCallerAndDoesNotReturnAValue() {
        try (Rig r = new Rig(2)) {
            r.call(Psci.CPU_ON_64, 1, ENTRY, 0);
            r.psci.started(1);
            r.caller[0] = 1;
            assertEquals(Psci.CPU_OFF, r.call(Psci.CPU_OFF), "x0 untouched: CPU_OFF does not return");
            assertEquals(new Request("off", 1, 0, 0), r.control.requests.get(1));
            r.caller[0] = 0;
            assertEquals(1, r.call(Psci.AFFINITY_INFO_64, 1, 0), "OFF");
            assertEquals(0, r.call(Psci.CPU_ON_64, 1, ENTRY, 5), "and it can be started again");
        }
    }

    @Test
    void affinityInfoLevelsAndUnknownTargets() {
        try (Rig r = new Rig(8)) {
            assertEquals(-2, r.call(Psci.AFFINITY_INFO_64, 8, 0), "Aff0 = 8 does not exist (8 per cluster)");
            assertEquals(1, r.call(Psci.AFFINITY_INFO_64, 7, 0), "PE 7");
            assertEquals(1, r.call(Psci.AFFINITY_INFO_32, 0xffff_ffff_0000_0007L, 0), "32-bit: low half");
            assertEquals(0, r.call(Psci.AFFINITY_INFO_64, 7, 1), "levels above 0 are always on (QEMU: one cluster)");
        }
    }

    @Test
    void featuresVersionAndTheMpidrMap() {
        try (Rig r = new Rig(2)) {
            assertEquals(0x1_0000, r.call(Psci.VERSION), "PSCI 1.0");
            for (int fn : new int[] {Psci.CPU_ON_64, Psci.CPU_ON_32, Psci.CPU_OFF, Psci.AFFINITY_INFO_64, Psci.AFFINITY_INFO_32,
                    Psci.VERSION, Psci.FEATURES, Psci.SYSTEM_OFF, Psci.SYSTEM_RESET, Psci.MIGRATE_INFO_TYPE}) {
                assertEquals(0, r.call(Psci.FEATURES, fn), "FEATURES(0x" + Integer.toHexString(fn) + ")");
            }
            assertEquals(-1, r.call(Psci.FEATURES, Psci.CPU_SUSPEND_64), "CPU_SUSPEND is not modelled");
            assertEquals(2, r.call(Psci.MIGRATE_INFO_TYPE));
        }
        // QEMU virt with a GICv2: 8 PEs per cluster, Aff0 the index within it, Aff1 the cluster.
        assertEquals(0, Psci.mpidr(0));
        assertEquals(7, Psci.mpidr(7));
        assertEquals(0x100, Psci.mpidr(8));
        assertEquals(0x103, Psci.mpidr(11));
    }

    @Test
    void theOnePeFirmwareHasNoCpuPowerControl() {
        try (Arm64Machine m = Arm64Machine.create(16L << 20)) {
            m.memory().write(RAM, Asm.arm64(CALL, 0));
            long[][] calls = {
                {Psci.CPU_ON_64, 0, ENTRY, 0, -1},
                {Psci.AFFINITY_INFO_64, 0, 0, 0, -1},
                {Psci.CPU_OFF, 0, 0, 0, -1},
                {Psci.FEATURES, Psci.CPU_ON_64, 0, 0, -1},
                {Psci.FEATURES, Psci.SYSTEM_OFF, 0, 0, 0},
                {Psci.VERSION, 0, 0, 0, 0x1_0000},
            };
            for (long[] c : calls) {
                for (int i = 0; i < 4; i++) m.setReg(Arm64Reg.X0 + i, c[i]);
                m.setPc(RAM);
                assertInstanceOf(StopReason.PoweredOff.class, m.run(1_000));
                assertEquals(c[4], m.reg(Arm64Reg.X20), "function 0x" + Long.toHexString(c[0]));
            }
        }
    }

    @Test
    void snapshotRoundTripWithTwoPes() throws IOException {
        Recorder control = new Recorder();
        Psci p = new Psci(2, control, () -> 0);
        assertEquals(Psci.SUCCESS, p.cpuOn(1, ENTRY, 42));
        byte[] state = save(p);
        Psci q = new Psci(2, new Recorder(), () -> 0);
        q.restoreState(new DataInputStream(new ByteArrayInputStream(state)));
        assertArrayEquals(state, save(q));
        assertEquals(Psci.PowerState.ON_PENDING, q.state(1));
        assertEquals(ENTRY, q.pendingEntry(1));
        assertEquals(42, q.pendingContextId(1));
        assertEquals(Psci.ON_PENDING, q.cpuOn(1, ENTRY, 0));
        q.started(1);
        assertEquals(Psci.AFFINITY_ON, q.affinityInfo(1, 0));
        Psci three = new Psci(3, new Recorder(), () -> 0);
        assertThrows(IOException.class, () -> three.restoreState(new DataInputStream(new ByteArrayInputStream(state))),
                "a 2-PE snapshot in a 3-PE machine");
    }

    static byte[] save(Psci p) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        p.saveState(new DataOutputStream(b));
        return b.toByteArray();
    }
}
