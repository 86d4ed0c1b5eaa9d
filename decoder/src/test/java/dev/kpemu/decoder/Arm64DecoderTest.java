package dev.kpemu.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.machine.Arch;
import dev.kpemu.testing.Asm;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * AArch64 decoding. Instruction words are encoded by hand from the Arm ARM field layouts and the
 * expected classes follow Linux's arm64 kprobes rules (reference notes 02-arm64-kprobes.md).
 */
class Arm64DecoderTest {
    /** A 4-byte aligned kernel-text address whose page offset is not zero (0x234). */
    static final long KTEXT = 0xffff800008001234L;
    static final long PAGE = KTEXT & ~0xfffL;
    static final long ORIGIN = 0x400000L;

    Decoder decoder;

    @BeforeEach
    void open() {
        decoder = Decoder.open(Arch.ARM64);
    }

    @AfterEach
    void close() {
        decoder.close();
    }

    /**
     * One row: the word, mnemonic, control flow, PC-relative kind and absolute target (null: none),
     * out-of-line handling.
     */
    record Row(int word, String mnemonic, BranchKind kind, PcRelative.Kind pcKind, Long target, OutOfLine outOfLine) {
        @Override
        public String toString() {
            return String.format("%s [%08x]", mnemonic, word);
        }
    }

    static Stream<Row> table() {
        return Stream.of(
                // b: 000101 imm26; imm26 = 4 -> +0x10; imm26 = -2 -> -8
                new Row(0x14000004, "b", BranchKind.JUMP, PcRelative.Kind.BRANCH, KTEXT + 0x10, OutOfLine.SIMULATE),
                new Row(0x17fffffe, "b", BranchKind.JUMP, PcRelative.Kind.BRANCH, KTEXT - 8, OutOfLine.SIMULATE),
                // bl: 100101 imm26
                new Row(0x94000004, "bl", BranchKind.CALL, PcRelative.Kind.BRANCH, KTEXT + 0x10, OutOfLine.SIMULATE),
                // b.eq: 01010100 imm19 0 cond; imm19 = 2 -> +8; b.ne imm19 = -1 -> -4
                new Row(0x54000040, "b.eq", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT + 8, OutOfLine.SIMULATE),
                new Row(0x54ffffe1, "b.ne", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT - 4, OutOfLine.SIMULATE),
                // cbz x0, +12: sf=1 011010 0 imm19=3 Rt=0; cbnz w1, +16
                new Row(0xb4000060, "cbz", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT + 12, OutOfLine.SIMULATE),
                new Row(0x35000081, "cbnz", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT + 16, OutOfLine.SIMULATE),
                // tbz w0, #1, +8: b5=0 011011 0 b40=00001 imm14=2 Rt=0; tbnz x3, #33, +4: b5=1 b40=00001 imm14=1
                new Row(0x36080040, "tbz", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT + 8, OutOfLine.SIMULATE),
                new Row(0xb7080023, "tbnz", BranchKind.CONDITIONAL_JUMP, PcRelative.Kind.BRANCH, KTEXT + 4, OutOfLine.SIMULATE),
                // adr x0, +0x10: immlo=0 immhi=4; adr x1, +1: immlo=1
                new Row(0x10000080, "adr", BranchKind.NONE, PcRelative.Kind.ADR, KTEXT + 0x10, OutOfLine.SIMULATE),
                new Row(0x30000001, "adr", BranchKind.NONE, PcRelative.Kind.ADR, KTEXT + 1, OutOfLine.SIMULATE),
                // adrp x0, +1 page: immlo=1 immhi=0; adrp x2, -1 page: imm21 = all ones
                new Row(0xb0000000, "adrp", BranchKind.NONE, PcRelative.Kind.ADRP, PAGE + 0x1000, OutOfLine.SIMULATE),
                new Row(0xf0ffffe2, "adrp", BranchKind.NONE, PcRelative.Kind.ADRP, PAGE - 0x1000, OutOfLine.SIMULATE),
                // ldr x0, +8 (01 011 0 00 imm19=2); ldr w1, +4; ldrsw x0, +8
                new Row(0x58000040, "ldr", BranchKind.NONE, PcRelative.Kind.LOAD_LITERAL, KTEXT + 8, OutOfLine.SIMULATE),
                new Row(0x18000021, "ldr", BranchKind.NONE, PcRelative.Kind.LOAD_LITERAL, KTEXT + 4, OutOfLine.SIMULATE),
                new Row(0x98000040, "ldrsw", BranchKind.NONE, PcRelative.Kind.LOAD_LITERAL, KTEXT + 8, OutOfLine.SIMULATE),
                // ldr s0, +8 (SIMD literal) and prfm literal: PC-relative, refused
                new Row(0x1c000040, "ldr", BranchKind.NONE, PcRelative.Kind.LOAD_LITERAL, KTEXT + 8, OutOfLine.REJECT),
                new Row(0xd8000040, "prfm", BranchKind.NONE, PcRelative.Kind.LOAD_LITERAL, KTEXT + 8, OutOfLine.REJECT),
                // br x16, blr x16 (Rn in bits 9:5), ret (Rn = x30)
                new Row(0xd61f0200, "br", BranchKind.INDIRECT_JUMP, null, null, OutOfLine.SIMULATE),
                new Row(0xd63f0200, "blr", BranchKind.INDIRECT_CALL, null, null, OutOfLine.SIMULATE),
                new Row(0xd65f03c0, "ret", BranchKind.RETURN, null, null, OutOfLine.SIMULATE),
                // retaa (PAC form) and eret: not simulated, refused
                new Row(0xd65f0bff, "retaa", BranchKind.RETURN, null, null, OutOfLine.REJECT),
                new Row(0xd69f03e0, "eret", BranchKind.RETURN, null, null, OutOfLine.REJECT),
                // exception generation: 11010100 opc imm16 op2 LL
                new Row(0xd4000001, "svc", BranchKind.TRAP, null, null, OutOfLine.REJECT),
                new Row(0xd4000002, "hvc", BranchKind.TRAP, null, null, OutOfLine.REJECT),
                new Row(0xd4200080, "brk", BranchKind.TRAP, null, null, OutOfLine.REJECT),
                new Row(0x00000000, "udf", BranchKind.TRAP, null, null, OutOfLine.REJECT),
                // exclusives: ldxr x0,[x1]; stxr w2,x0,[x1]; ldaxr; stlxr -> refused
                new Row(0xc85f7c20, "ldxr", BranchKind.NONE, null, null, OutOfLine.REJECT),
                new Row(0xc8027c20, "stxr", BranchKind.NONE, null, null, OutOfLine.REJECT),
                new Row(0xc85ffc20, "ldaxr", BranchKind.NONE, null, null, OutOfLine.REJECT),
                new Row(0xc802fc20, "stlxr", BranchKind.NONE, null, null, OutOfLine.REJECT),
                // ldar (bit 23 set) is not an exclusive: stepped
                new Row(0xc8dffc20, "ldar", BranchKind.NONE, null, null, OutOfLine.COPY),
                // nop is simulated (6.12+), paciasp is a whitelisted hint, wfi is not
                new Row(0xd503201f, "nop", BranchKind.NONE, null, null, OutOfLine.SIMULATE),
                new Row(0xd503233f, "paciasp", BranchKind.NONE, null, null, OutOfLine.COPY),
                new Row(0xd503207f, "wfi", BranchKind.NONE, null, null, OutOfLine.REJECT),
                // msr daifset, #2 refused; mrs x0, daif refused (stepping changes DAIF)
                new Row(0xd50342df, "msr", BranchKind.NONE, null, null, OutOfLine.REJECT),
                new Row(0xd53b4220, "mrs", BranchKind.NONE, null, null, OutOfLine.REJECT),
                // add x0, x1, x2: sf=1 0 0 01011 00 0 Rm=2 imm6=0 Rn=1 Rd=0
                new Row(0x8b020020, "add", BranchKind.NONE, null, null, OutOfLine.COPY));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("table")
    void classifiesHandEncodedWords(Row row) {
        Instruction insn = decoder.decodeOne(le(row.word()), KTEXT);

        assertEquals(4, insn.length());
        assertEquals(row.mnemonic(), insn.mnemonic());
        assertEquals(row.kind(), insn.branchKind(), "branch kind");
        assertEquals(row.outOfLine(), insn.outOfLine(), "out of line");
        assertFalse(insn.boostable(), "arm64 never boosts");
        assertEquals(row.outOfLine() == OutOfLine.COPY, insn.relocatable(), "relocatable");
        Optional<PcRelative> expectedRef = row.pcKind() == null ? Optional.empty()
                : Optional.of(new PcRelative(row.pcKind(), row.target(), 0, 0));
        assertEquals(expectedRef, insn.pcRelative(), "pc-relative");
        OptionalLong expectedTarget = row.kind().isDirect() ? OptionalLong.of(row.target()) : OptionalLong.empty();
        assertEquals(expectedTarget, insn.branchTarget(), "branch target");
    }

    @Test
    void brkImmediateIsInTheOperandText() {
        Instruction brk = decoder.decodeOne(le(0xd4200080), KTEXT);
        assertEquals("brk #4", brk.text());
    }

    @Test
    void assembledBranchesAndLiterals() {
        // 0x00 b l1 | 0x04 bl l1 | 0x08 cbz x1, l1 | 0x0c tbnz w2, #3, l1 | 0x10 adr x3, l1 | 0x14 ldr x4, l1 | 0x18 l1: ret
        byte[] code = Asm.arm64("""
                b l1
                bl l1
                cbz x1, l1
                tbnz w2, #3, l1
                adr x3, l1
                ldr x4, l1
                l1: ret
                """, ORIGIN);
        Disassembly d = decoder.decodeAll(code, ORIGIN);
        assertTrue(d.complete());
        long l1 = ORIGIN + 0x18;
        List<BranchKind> kinds = List.of(BranchKind.JUMP, BranchKind.CALL, BranchKind.CONDITIONAL_JUMP,
                BranchKind.CONDITIONAL_JUMP, BranchKind.NONE, BranchKind.NONE, BranchKind.RETURN);
        assertEquals(kinds, d.instructions().stream().map(Instruction::branchKind).toList());
        for (int i = 0; i < 6; i++) {
            assertEquals(l1, d.instructions().get(i).pcRelative().orElseThrow().target(), "instruction " + i);
        }
        assertEquals(OptionalLong.of(l1), d.instructions().get(1).branchTarget());
        assertEquals(OptionalLong.empty(), d.instructions().get(4).branchTarget());
    }

    @Test
    void adrpAcrossAPageBoundary() {
        // adrp x0, +1 page (0xb0000000) in the last word of a page and in the first word of the next:
        // (pc & ~0xfff) + 0x1000 moves by a whole page although pc moves by 4. (Not assembled: Keystone
        // 0.9 encodes the label's absolute page instead of the page delta for "adrp x0, label".)
        Instruction last = decoder.decodeOne(le(0xb0000000), 0x400ffcL);
        Instruction first = decoder.decodeOne(le(0xb0000000), 0x401000L);
        assertEquals(new PcRelative(PcRelative.Kind.ADRP, 0x401000L, 0, 0), last.pcRelative().orElseThrow());
        assertEquals(new PcRelative(PcRelative.Kind.ADRP, 0x402000L, 0, 0), first.pcRelative().orElseThrow());
        assertEquals(OutOfLine.SIMULATE, last.outOfLine());
    }

    @Test
    void systemRegisterReadsAreSteppedExceptDaif() {
        // Linux 6.1 accepts a probe on "mrs x0, sp_el0" (recorded: guest-images/reference/arm64/dialect.error_log, get_signal+0x10)
        assertEquals(OutOfLine.COPY, decoder.decodeOne(Asm.arm64("mrs x0, tpidr_el1", ORIGIN), ORIGIN).outOfLine());
        assertEquals(OutOfLine.COPY, decoder.decodeOne(Asm.arm64("mrs x0, sp_el0", ORIGIN), ORIGIN).outOfLine());
        assertEquals(OutOfLine.REJECT, decoder.decodeOne(Asm.arm64("mrs x5, daif", ORIGIN), ORIGIN).outOfLine());
        assertEquals(OutOfLine.REJECT, decoder.decodeOne(Asm.arm64("msr daifclr, #2", ORIGIN), ORIGIN).outOfLine());
        assertEquals(OutOfLine.REJECT, decoder.decodeOne(Asm.arm64("ldaxr w1, [x2]", ORIGIN), ORIGIN).outOfLine());
    }

    @Test
    void decodesAWholeFunctionAndStopsAtUndecodableWord() {
        byte[] fn = Asm.arm64("""
                stp x29, x30, [sp, #-16]!
                mov x29, sp
                cbz x0, done
                bl callee
                done:
                ldp x29, x30, [sp], #16
                ret
                callee:
                ret
                """, ORIGIN);
        assertEquals(7 * 4, fn.length);
        byte[] code = new byte[fn.length + 8];
        System.arraycopy(fn, 0, code, 0, fn.length);
        System.arraycopy(le(0xffffffff), 0, code, fn.length, 4);   // unallocated encoding
        System.arraycopy(le(0xd503201f), 0, code, fn.length + 4, 4);

        Disassembly d = decoder.decodeAll(code, ORIGIN);
        assertEquals(7, d.instructions().size());
        assertEquals(OptionalLong.of(ORIGIN + 0x1c), d.undecodableAt());
        assertFalse(d.complete());
        assertEquals(OptionalLong.of(ORIGIN + 0x10), d.at(ORIGIN + 8).orElseThrow().branchTarget());
        assertEquals(OptionalLong.of(ORIGIN + 0x18), d.at(ORIGIN + 0xc).orElseThrow().branchTarget());
        assertEquals(BranchKind.CALL, d.at(ORIGIN + 0xc).orElseThrow().branchKind());
        assertTrue(d.isBoundary(ORIGIN + 0x14));
        assertFalse(d.isBoundary(ORIGIN + 0x2));
    }

    @Test
    void undecodableWordsThrow() {
        UndecodableInstructionException e = assertThrows(UndecodableInstructionException.class,
                () -> decoder.decodeOne(le(0xffffffff), KTEXT));
        assertEquals(KTEXT, e.address());
        assertThrows(UndecodableInstructionException.class, () -> decoder.decodeOne(new byte[] {0x1f, 0x20}, KTEXT));
    }

    static byte[] le(int word) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(word).array();
    }
}
