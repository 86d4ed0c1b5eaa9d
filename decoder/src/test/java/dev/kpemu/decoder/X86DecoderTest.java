package dev.kpemu.decoder;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.machine.Arch;
import dev.kpemu.testing.Asm;
import java.util.HexFormat;
import java.util.List;
import java.util.OptionalLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * x86-64 decoding. Every expected value is worked out by hand from the Intel SDM encodings and the
 * Linux kprobes rules (reference notes 01-x86-kprobes.md), not taken from the decoder.
 */
class X86DecoderTest {
    /** A kernel-text address: targets must be computed in full 64 bits. */
    static final long KTEXT = 0xffffffff81000000L;
    /** Where Asm-assembled snippets are linked. */
    static final long ORIGIN = 0x401000L;

    Decoder decoder;

    @BeforeEach
    void open() {
        decoder = Decoder.open(Arch.X86_64);
    }

    @AfterEach
    void close() {
        decoder.close();
    }

    /** One row: raw bytes, mnemonic, control flow, direct target relative to KTEXT, out-of-line handling, boostable. */
    record Row(String hex, String mnemonic, BranchKind kind, Long targetDelta, OutOfLine outOfLine, boolean boostable) {
        @Override
        public String toString() {
            return mnemonic + " [" + hex + "]";
        }
    }

    static Stream<Row> table() {
        return Stream.of(
                // jmp rel8: eb ib, target = next + ib = 2 + 0x10
                new Row("eb10", "jmp", BranchKind.JUMP, 0x12L, OutOfLine.SIMULATE, false),
                // jmp rel32: e9 id, target = 5 + 0x100
                new Row("e900010000", "jmp", BranchKind.JUMP, 0x105L, OutOfLine.SIMULATE, false),
                // jmp rel32 backwards to itself: 5 + (-5)
                new Row("e9fbffffff", "jmp", BranchKind.JUMP, 0L, OutOfLine.SIMULATE, false),
                // je rel8 to itself: 2 + (-2)
                new Row("74fe", "je", BranchKind.CONDITIONAL_JUMP, 0L, OutOfLine.SIMULATE, false),
                // jne rel32: 0f 85 cd, target = 6 + 0x10
                new Row("0f8510000000", "jne", BranchKind.CONDITIONAL_JUMP, 0x16L, OutOfLine.SIMULATE, false),
                // call rel32 with rel 0: target = next instruction
                new Row("e800000000", "call", BranchKind.CALL, 5L, OutOfLine.SIMULATE, false),
                // call rel32 backwards: 5 + (-0x105) = -0x100
                new Row("e8fbfeffff", "call", BranchKind.CALL, -0x100L, OutOfLine.SIMULATE, false),
                // loop rel8 to itself, jrcxz to next
                new Row("e2fe", "loop", BranchKind.CONDITIONAL_JUMP, 0L, OutOfLine.SIMULATE, false),
                new Row("e300", "jrcxz", BranchKind.CONDITIONAL_JUMP, 2L, OutOfLine.SIMULATE, false),
                // ret is emulated, yet can_boost accepts c3
                new Row("c3", "ret", BranchKind.RETURN, null, OutOfLine.SIMULATE, true),
                new Row("c20800", "ret", BranchKind.RETURN, null, OutOfLine.SIMULATE, true),
                // jmp rax = ff /4 mod 3 (ModRM e0): emulated, boostable (ff with reg 4)
                new Row("ffe0", "jmp", BranchKind.INDIRECT_JUMP, null, OutOfLine.SIMULATE, true),
                // call rax = ff /2 mod 3 (ModRM d0): emulated, not boostable
                new Row("ffd0", "call", BranchKind.INDIRECT_CALL, null, OutOfLine.SIMULATE, false),
                // jmp [rip+0x10] = ff /4 with memory operand: refused
                new Row("ff2510000000", "jmp", BranchKind.INDIRECT_JUMP, null, OutOfLine.REJECT, false),
                // call [rax] = ff /2 memory: refused
                new Row("ff10", "call", BranchKind.INDIRECT_CALL, null, OutOfLine.REJECT, false),
                // jmp far [rax] = ff /5 (m16:64): far indirect, refused
                new Row("ff28", "jmp", BranchKind.INDIRECT_JUMP, null, OutOfLine.REJECT, false),
                // traps
                new Row("cc", "int3", BranchKind.TRAP, null, OutOfLine.REJECT, false),
                new Row("cd80", "int", BranchKind.TRAP, null, OutOfLine.REJECT, false),
                new Row("0f05", "syscall", BranchKind.TRAP, null, OutOfLine.REJECT, false),
                new Row("0f0b", "ud2", BranchKind.TRAP, null, OutOfLine.REJECT, false),
                new Row("0f01c1", "vmcall", BranchKind.TRAP, null, OutOfLine.REJECT, false),
                // iretq: REX.W cf, refused
                new Row("48cf", "iretq", BranchKind.RETURN, null, OutOfLine.REJECT, false),
                // IF modifiers are emulated; can_boost's default branch accepts them
                new Row("9c", "pushfq", BranchKind.NONE, null, OutOfLine.SIMULATE, true),
                new Row("9d", "popfq", BranchKind.NONE, null, OutOfLine.SIMULATE, true),
                new Row("fa", "cli", BranchKind.NONE, null, OutOfLine.SIMULATE, true),
                new Row("fb", "sti", BranchKind.NONE, null, OutOfLine.SIMULATE, true),
                // mov ss, ax = 8e /2 (ModRM d0): masks the single-step trap, refused
                new Row("8ed0", "mov", BranchKind.NONE, null, OutOfLine.REJECT, false),
                // plain instructions are copied
                new Row("90", "nop", BranchKind.NONE, null, OutOfLine.COPY, true),
                new Row("4801d8", "add", BranchKind.NONE, null, OutOfLine.COPY, true),
                new Row("55", "push", BranchKind.NONE, null, OutOfLine.COPY, true),
                // cs-prefixed mov: copied, but can_boost refuses the 0x2e prefix
                new Row("2e4889c3", "mov", BranchKind.NONE, null, OutOfLine.COPY, false),
                // cmove eax, ecx = 0f 44: twobyte_is_boostable row 40 is all ones
                new Row("0f44c1", "cmove", BranchKind.NONE, null, OutOfLine.COPY, true),
                // endbr64 = f3 0f 1e fa: 0f 1e is not in the boostable table
                new Row("f30f1efa", "endbr64", BranchKind.NONE, null, OutOfLine.COPY, false),
                // hlt (f4) and shl eax,1 (d1 /4) are never boosted
                new Row("f4", "hlt", BranchKind.NONE, null, OutOfLine.COPY, false),
                new Row("d1e0", "shl", BranchKind.NONE, null, OutOfLine.COPY, false));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("table")
    void classifiesRawBytes(Row row) {
        byte[] code = HexFormat.of().parseHex(row.hex());
        Instruction insn = decoder.decodeOne(code, KTEXT);

        assertEquals(code.length, insn.length(), "length");
        assertArrayEquals(code, insn.bytes());
        assertEquals(row.mnemonic(), insn.mnemonic());
        assertEquals(row.kind(), insn.branchKind(), "branch kind");
        OptionalLong expectedTarget = row.targetDelta() == null ? OptionalLong.empty()
                : OptionalLong.of(KTEXT + row.targetDelta());
        assertEquals(expectedTarget, insn.branchTarget(), "branch target");
        assertEquals(row.outOfLine(), insn.outOfLine(), "out of line");
        assertEquals(row.boostable(), insn.boostable(), "boostable");
        assertEquals(row.outOfLine() == OutOfLine.COPY || row.outOfLine() == OutOfLine.COPY_WITH_FIXUP,
                insn.relocatable(), "relocatable");
    }

    @Test
    void ud1WithPrefixesDecodes() {
        // Linux 6.12's UBSAN trap in init_amd: 67 48 0f b9 3a = addr32 REX.W UD1 rdi, [edx] (0f b9 /r, ModRM 3a)
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("67480fb93ae91cfdffff"), KTEXT);
        assertEquals(5, insn.length());
        // the sweep goes on from the true boundary: the jmp rel32 after it, then nothing left
        Disassembly all = decoder.decodeAll(HexFormat.of().parseHex("67480fb93ae91cfdffff" + "0fb9442408" + "90"), KTEXT);
        assertTrue(all.complete());
        assertEquals(List.of(KTEXT, KTEXT + 5, KTEXT + 10, KTEXT + 15), all.instructions().stream().map(Instruction::address).toList());
        assertEquals(BranchKind.JUMP, all.instructions().get(1).branchKind());
        assertEquals(KTEXT + 10 + 0xfffffd1cL - 0x100000000L, all.instructions().get(1).branchTarget().getAsLong());
    }

    /**
     * Instructions Debian's kernels hold that Capstone 5.0 does not decode, with their lengths from
     * the SDM / AMD APM encodings (each fixed, no operand bytes); lkgs is f2 0f 00 /6 with a register ModRM.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("beyondCapstone")
    void instructionsCapstoneDoesNotDecodeHaveTheirLengths(String name, String hex, int length) {
        Disassembly all = decoder.decodeAll(HexFormat.of().parseHex(hex + "90"), KTEXT);
        assertTrue(all.complete(), name);
        assertEquals(List.of(KTEXT, KTEXT + length), all.instructions().stream().map(Instruction::address).toList(), name);
        assertEquals(name, all.instructions().get(0).mnemonic());
        assertEquals(length, decoder.decodeOne(HexFormat.of().parseHex(hex + "90"), KTEXT).length(), name);
    }

    static Stream<org.junit.jupiter.params.provider.Arguments> beyondCapstone() {
        return Stream.of(
                org.junit.jupiter.params.provider.Arguments.of("serialize", "0f01e8", 3),
                org.junit.jupiter.params.provider.Arguments.of("wrmsrns", "0f01c6", 3),
                org.junit.jupiter.params.provider.Arguments.of("tdcall", "660f01cc", 4),
                org.junit.jupiter.params.provider.Arguments.of("pvalidate", "f20f01ff", 4),
                org.junit.jupiter.params.provider.Arguments.of("rmpupdate", "f20f01fe", 4),
                org.junit.jupiter.params.provider.Arguments.of("rmpadjust", "f30f01fe", 4),
                org.junit.jupiter.params.provider.Arguments.of("psmash", "f30f01ff", 4),
                org.junit.jupiter.params.provider.Arguments.of("tilerelease", "c4e27849c0", 5),
                org.junit.jupiter.params.provider.Arguments.of("lkgs", "f20f00f7", 4));
    }

    @Test
    void ripRelativeLoadFromRawBytes() {
        // mov rax, [rip+0x1234] = REX.W 8b /r, ModRM 05 (mod 00, r/m 101), disp32 at offset 3
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("488b0534120000"), KTEXT);
        assertEquals(7, insn.length());
        assertEquals(BranchKind.NONE, insn.branchKind());
        assertEquals(new PcRelative(PcRelative.Kind.RIP_RELATIVE, KTEXT + 7 + 0x1234, 3, 4), insn.pcRelative().orElseThrow());
        assertEquals(OutOfLine.COPY_WITH_FIXUP, insn.outOfLine());
        assertTrue(insn.relocatable());
        assertTrue(insn.boostable());
    }

    @Test
    void ripRelativeLoadAssembled() {
        byte[] code = Asm.x86(".intel_syntax noprefix\nmov rax, [rip + 0x1234]", ORIGIN);
        Instruction insn = decoder.decodeOne(code, ORIGIN);
        assertEquals(7, insn.length());
        PcRelative ref = insn.pcRelative().orElseThrow();
        assertEquals(PcRelative.Kind.RIP_RELATIVE, ref.kind());
        assertEquals(ORIGIN + 7 + 0x1234, ref.target());
        assertEquals(3, ref.fieldOffset());
        assertEquals(4, ref.fieldSize());
    }

    @Test
    void ripRelativeStoreWithImmediateCountsTheWholeLength() {
        // mov dword ptr [rip+0x100], 2 = c7 /0, ModRM 05, disp32 at 2, imm32 at 6: length 10
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("c7050001000002000000"), KTEXT);
        assertEquals(10, insn.length());
        assertEquals(new PcRelative(PcRelative.Kind.RIP_RELATIVE, KTEXT + 10 + 0x100, 2, 4), insn.pcRelative().orElseThrow());
        assertEquals(OutOfLine.COPY_WITH_FIXUP, insn.outOfLine());
    }

    @Test
    void ripRelativeLeaWithNegativeDisplacementAndLockedCmpxchg() {
        // lea rdi, [rip-0x10] = 48 8d 3d f0ff ffff
        Instruction lea = decoder.decodeOne(HexFormat.of().parseHex("488d3df0ffffff"), KTEXT);
        assertEquals(new PcRelative(PcRelative.Kind.RIP_RELATIVE, KTEXT + 7 - 0x10, 3, 4), lea.pcRelative().orElseThrow());
        // lock cmpxchg [rip], rcx = f0 48 0f b1 0d disp32: displacement after 5 bytes
        Instruction cas = decoder.decodeOne(HexFormat.of().parseHex("f0480fb10d00000000"), KTEXT);
        assertEquals(9, cas.length());
        assertEquals(new PcRelative(PcRelative.Kind.RIP_RELATIVE, KTEXT + 9, 5, 4), cas.pcRelative().orElseThrow());
        assertEquals(OutOfLine.COPY_WITH_FIXUP, cas.outOfLine());
    }

    @Test
    void indirectJumpThroughRipSlotReportsTheSlotButNoBranchTarget() {
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("ff2510000000"), KTEXT);
        assertEquals(OptionalLong.empty(), insn.branchTarget());
        assertEquals(new PcRelative(PcRelative.Kind.RIP_RELATIVE, KTEXT + 6 + 0x10, 2, 4), insn.pcRelative().orElseThrow());
    }

    @Test
    void directBranchesReportTheirRelativeField() {
        assertEquals(new PcRelative(PcRelative.Kind.BRANCH, KTEXT + 0x12, 1, 1),
                decoder.decodeOne(HexFormat.of().parseHex("eb10"), KTEXT).pcRelative().orElseThrow());
        assertEquals(new PcRelative(PcRelative.Kind.BRANCH, KTEXT + 0x16, 2, 4),
                decoder.decodeOne(HexFormat.of().parseHex("0f8510000000"), KTEXT).pcRelative().orElseThrow());
        assertEquals(new PcRelative(PcRelative.Kind.BRANCH, KTEXT + 5, 1, 4),
                decoder.decodeOne(HexFormat.of().parseHex("e800000000"), KTEXT).pcRelative().orElseThrow());
    }

    @Test
    void assembledBranchesHitTheirLabels() {
        // call f (5) ; jne f (2, short) ; jmp far_away (5, rel32) ; nop ; f: ret ; .skip 0x100 ; far_away: ret
        byte[] code = Asm.x86("""
                .intel_syntax noprefix
                call f
                jne f
                jmp far_away
                nop
                f: ret
                .skip 0x100, 0xcc
                far_away: ret
                """, ORIGIN);
        Disassembly d = decoder.decodeAll(code, ORIGIN);
        long f = ORIGIN + 5 + 2 + 5 + 1;
        long farAway = f + 1 + 0x100;
        Instruction call = d.at(ORIGIN).orElseThrow();
        Instruction jne = d.at(ORIGIN + 5).orElseThrow();
        Instruction jmp = d.at(ORIGIN + 7).orElseThrow();
        assertEquals(BranchKind.CALL, call.branchKind());
        assertEquals(OptionalLong.of(f), call.branchTarget());
        assertEquals(BranchKind.CONDITIONAL_JUMP, jne.branchKind());
        assertEquals(2, jne.length());
        assertEquals(OptionalLong.of(f), jne.branchTarget());
        assertEquals(BranchKind.JUMP, jmp.branchKind());
        assertEquals(5, jmp.length());
        assertEquals(OptionalLong.of(farAway), jmp.branchTarget());
        assertEquals(BranchKind.RETURN, d.at(f).orElseThrow().branchKind());
        assertEquals(BranchKind.TRAP, d.at(f + 1).orElseThrow().branchKind()); // int3 padding
    }

    @Test
    void relocatesRipRelativeDisplacementLikeLinux() {
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("488b0534120000"), KTEXT);
        // new disp = src + old - real = 0x1234 - 0x1000
        assertArrayEquals(HexFormat.of().parseHex("488b0534020000"), insn.relocatedTo(KTEXT + 0x1000));
        // moving it 0x2000 below: 0x1234 + 0x2000 = 0x3234
        assertArrayEquals(HexFormat.of().parseHex("488b0534320000"), insn.relocatedTo(KTEXT - 0x2000));
        assertThrows(IllegalArgumentException.class, () -> insn.relocatedTo(KTEXT + 0x1_0000_0000L));
    }

    @Test
    void relocatingCopiesPlainBytesAndRefusesBranches() {
        assertArrayEquals(new byte[] {(byte) 0x90}, decoder.decodeOne(new byte[] {(byte) 0x90}, KTEXT).relocatedTo(0x1000));
        Instruction jmp = decoder.decodeOne(HexFormat.of().parseHex("eb10"), KTEXT);
        assertFalse(jmp.relocatable());
        assertThrows(IllegalStateException.class, () -> jmp.relocatedTo(0x1000));
    }

    @Test
    void decodesAWholeFunctionAndStopsAtUndecodableBytes() {
        byte[] fn = Asm.x86("""
                .intel_syntax noprefix
                push rbp
                mov rbp, rsp
                mov rax, [rip + 0x100]
                test rax, rax
                je 1f
                call g
                1: pop rbp
                ret
                g: ret
                """, ORIGIN);
        // offsets by hand: push 0 (1), mov 1 (3), mov rip 4 (7), test 11 (3), je 14 (2), call 16 (5), pop 21, ret 22, g 23
        assertEquals(24, fn.length);
        byte[] code = new byte[fn.length + 2];
        System.arraycopy(fn, 0, code, 0, fn.length);
        code[fn.length] = 0x06;     // push es: invalid in 64-bit mode
        code[fn.length + 1] = (byte) 0x90;

        Disassembly d = decoder.decodeAll(code, ORIGIN);
        assertEquals(List.of(0L, 1L, 4L, 11L, 14L, 16L, 21L, 22L, 23L),
                d.instructions().stream().map(i -> i.address() - ORIGIN).toList());
        assertFalse(d.complete());
        assertEquals(OptionalLong.of(ORIGIN + 24), d.undecodableAt());
        assertEquals(ORIGIN + 24, d.decodedEnd());
        assertTrue(d.isBoundary(ORIGIN + 4));
        assertFalse(d.isBoundary(ORIGIN + 5));
        assertEquals(OptionalLong.of(ORIGIN + 21), d.at(ORIGIN + 14).orElseThrow().branchTarget());
        assertEquals(OptionalLong.of(ORIGIN + 23), d.at(ORIGIN + 16).orElseThrow().branchTarget());
        assertEquals(ORIGIN + 11 + 0x100, d.at(ORIGIN + 4).orElseThrow().pcRelative().orElseThrow().target());

        Disassembly whole = decoder.decodeAll(fn, ORIGIN);
        assertTrue(whole.complete());
        assertEquals(9, whole.instructions().size());
    }

    @Test
    void undecodableBytesThrowWithTheirAddress() {
        UndecodableInstructionException e = assertThrows(UndecodableInstructionException.class,
                () -> decoder.decodeOne(new byte[] {0x06}, KTEXT));
        assertEquals(KTEXT, e.address());
        // call rel32 cut short after 3 bytes
        assertThrows(UndecodableInstructionException.class,
                () -> decoder.decodeOne(HexFormat.of().parseHex("e80000"), KTEXT));
        assertThrows(UndecodableInstructionException.class, () -> decoder.decodeOne(new byte[0], KTEXT));
    }

    @Test
    void decodeOneIgnoresTrailingBytes() {
        Instruction insn = decoder.decodeOne(HexFormat.of().parseHex("c3cccccc"), KTEXT);
        assertEquals(1, insn.length());
        assertEquals(KTEXT + 1, insn.nextAddress());
        assertEquals("ret", insn.text());
    }
}
