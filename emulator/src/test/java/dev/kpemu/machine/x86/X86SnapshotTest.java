package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.Map;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.snapshot.MachineSnapshot;
import dev.kpemu.machine.snapshot.SnapshotException;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.X86Reg;

/**
 * A bare-metal x86-64 guest saved between two halts and restored into a fresh machine: the
 * restored machine finishes the program with the general registers, SSE state, MSRs and memory
 * the first half left (expected values computed by hand), and exactly as the original machine
 * finishes it; a machine rewound to its own snapshot runs the second half again the same way.
 * Damaged and foreign snapshots are refused with their kind.
 */
class X86SnapshotTest {
    static final long RESULTS = X86MachineTest.RESULTS, CODE = X86MachineTest.CODE;
    static final Map<String, String> ID = Map.of("test", "x86 bare metal");

    /** First half: sum 1..100 in r12, a value in xmm3, MSR_LSTAR, a stack push; halt. Second half reads them back. */
    static final String PROGRAM = """
            _start:
              xor %r12, %r12
              mov $100, %ecx
            1: add %rcx, %r12
              loop 1b
              mov $0x1122334455667788, %rax
              movq %rax, %xmm3
              mov $0xc0000082, %ecx
              mov $0xffffffff81234560, %rax
              mov %rax, %rdx
              shr $32, %rdx
              wrmsr
              push $0x77
              hlt
              movq %xmm3, %rax
              mov %rax, 0x200008
              mov $0xc0000082, %ecx
              rdmsr
              shl $32, %rdx
              or %rdx, %rax
              mov %rax, 0x200010
              pop %rax
              mov %rax, 0x200018
              mov $200, %ecx
            2: add %rcx, %r12
              loop 2b
              mov %r12, 0x200000
              hlt
            """;

    private static X86Machine firstHalf() {
        X86Machine m = X86MachineTest.paged();
        m.memory().write(CODE, Asm.x86(PROGRAM, CODE));
        m.setPc(CODE);
        // SSE needs CR4.OSFXSR (bit 9), as an OS sets it
        m.engine().regWrite(X86Reg.CR4, m.engine().regRead(X86Reg.CR4) | 1 << 9);
        StopReason r = m.run(1_000_000);
        assertInstanceOf(StopReason.Halted.class, r, r.toString());
        return m;
    }

    private static byte[] save(X86Machine m) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        MachineSnapshot.save(m, ID, out);
        return out.toByteArray();
    }

    @Test
    void restoredMachineFinishesTheProgramAsTheOriginalDoes() throws Exception {
        try (X86Machine original = firstHalf(); X86Machine restored = X86Machine.create(12 << 20)) {
            byte[] snap = save(original);
            MachineSnapshot.restore(restored, ID, new ByteArrayInputStream(snap), "test");
            assertEquals(original.pc(), restored.pc());
            assertEquals(original.clock().instructions(), restored.clock().instructions(), "the clock is restored");
            for (X86Machine m : new X86Machine[] {original, restored}) {
                assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
                assertEquals(5050 + 20100, m.memory().readLong(RESULTS), "r12 carried over: sum 1..100 then 1..200");
                assertEquals(0x1122334455667788L, m.memory().readLong(RESULTS + 8), "xmm3");
                assertEquals(0xffffffff81234560L, m.memory().readLong(RESULTS + 16), "MSR_LSTAR");
                assertEquals(0x77, m.memory().readLong(RESULTS + 24), "the pushed word, through the restored page tables and RSP");
            }
            assertEquals(original.clock().instructions(), restored.clock().instructions(), "instructions to the second halt");
            assertEquals(original.pc(), restored.pc());
            assertEquals(original.engine().regRead(X86Reg.RSP), restored.engine().regRead(X86Reg.RSP));
            assertEquals(original.engine().regRead(X86Reg.CR3), restored.engine().regRead(X86Reg.CR3));
        }
    }

    @Test
    void anUncompressedSnapshotRestoresAsTheCompressedOneDoes() throws Exception {
        try (X86Machine original = firstHalf(); X86Machine viaZstd = X86Machine.create(12 << 20); X86Machine plain = X86Machine.create(12 << 20)) {
            byte[] compressed = save(original);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            MachineSnapshot.saveUncompressed(original, ID, out);
            byte[] uncompressed = out.toByteArray();
            assertTrue(uncompressed.length > compressed.length, uncompressed.length + " bytes, compressed " + compressed.length);
            MachineSnapshot.restore(viaZstd, ID, new ByteArrayInputStream(compressed), "test");
            MachineSnapshot.restoreUncompressed(plain, ID, new ByteArrayInputStream(uncompressed), "test");
            for (X86Machine m : new X86Machine[] {viaZstd, plain}) {
                assertEquals(original.pc(), m.pc());
                assertEquals(original.clock().instructions(), m.clock().instructions());
                assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
                assertEquals(5050 + 20100, m.memory().readLong(RESULTS), "r12 carried over: sum 1..100 then 1..200");
                assertEquals(0x77, m.memory().readLong(RESULTS + 24), "the pushed word, through the restored page tables and RSP");
            }
            assertEquals(viaZstd.clock().instructions(), plain.clock().instructions(), "instructions to the second halt");
            assertEquals(viaZstd.engine().regRead(X86Reg.RSP), plain.engine().regRead(X86Reg.RSP));
            byte[] cut = java.util.Arrays.copyOf(uncompressed, uncompressed.length - 9);
            try (X86Machine fresh = X86Machine.create(12 << 20)) {
                SnapshotException e = assertThrows(SnapshotException.class,
                        () -> MachineSnapshot.restoreUncompressed(fresh, ID, new ByteArrayInputStream(cut), "test"));
                assertEquals(SnapshotException.Kind.CORRUPT, e.kind(), e.getMessage());
            }
        }
    }

    @Test
    void aMachineRewoundToItsSnapshotRunsTheSecondHalfAgain() throws Exception {
        try (X86Machine m = firstHalf()) {
            byte[] snap = save(m);
            long at = m.clock().instructions();
            assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
            long end = m.clock().instructions();
            assertEquals(5050 + 20100, m.memory().readLong(RESULTS));
            MachineSnapshot.restore(m, ID, new ByteArrayInputStream(snap), "test");
            assertEquals(at, m.clock().instructions(), "the clock went back");
            assertEquals(0, m.memory().readLong(RESULTS), "memory is the snapshot's: the result page (all zero then) is zeroed");
            assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
            assertEquals(5050 + 20100, m.memory().readLong(RESULTS));
            assertEquals(end, m.clock().instructions(), "the same instructions the second time");
        }
    }

    @Test
    void sparseRamKeepsOnlyWrittenPages() throws Exception {
        try (X86Machine m = firstHalf()) {
            // 12 MiB of RAM, of which the page tables, GDT, code and stack pages hold data
            byte[] snap = save(m);
            assertTrue(snap.length < 64 << 10, "a mostly empty 12 MiB machine compresses to little: " + snap.length);
        }
    }

    @Test
    void damagedForeignAndMismatchedSnapshotsAreRefused() throws Exception {
        byte[] snap;
        try (X86Machine m = firstHalf()) {
            snap = save(m);
        }
        assertRefused(SnapshotException.Kind.CORRUPT, Arrays.copyOf(snap, snap.length - 20), ID, 12);
        assertRefused(SnapshotException.Kind.CORRUPT, Arrays.copyOf(snap, 10), ID, 12);
        byte[] flipped = snap.clone();
        flipped[flipped.length / 2] ^= 0x40;
        assertRefused(SnapshotException.Kind.CORRUPT, flipped, ID, 12);
        byte[] notOne = "not a snapshot at all, just text".getBytes();
        assertRefused(SnapshotException.Kind.CORRUPT, notOne, ID, 12);
        SnapshotException other = assertRefused(SnapshotException.Kind.OTHER_MACHINE, snap, Map.of("test", "another kernel"), 12);
        assertTrue(other.getMessage().contains("test is 'x86 bare metal', this boot's 'another kernel'"), other.getMessage());
        assertRefused(SnapshotException.Kind.OTHER_MACHINE, snap, ID, 16);
        try (Arm64Machine arm = Arm64Machine.create(12 << 20)) {
            SnapshotException e = assertThrows(SnapshotException.class, () -> MachineSnapshot.restore(arm, ID, new ByteArrayInputStream(snap), "test"));
            assertEquals(SnapshotException.Kind.OTHER_MACHINE, e.kind());
        }
    }

    private static SnapshotException assertRefused(SnapshotException.Kind kind, byte[] file, Map<String, String> id, int ramMiB) {
        try (X86Machine fresh = X86Machine.create((long) ramMiB << 20)) {
            SnapshotException e = assertThrows(SnapshotException.class, () -> MachineSnapshot.restore(fresh, id, new ByteArrayInputStream(file), "test"));
            assertEquals(kind, e.kind(), e.getMessage());
            assertTrue(!e.getMessage().contains("\n"), "one line: " + e.getMessage());
            return e;
        }
    }
}
