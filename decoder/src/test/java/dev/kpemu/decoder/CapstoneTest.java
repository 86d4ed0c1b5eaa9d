package dev.kpemu.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.machine.Arch;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/** The FFM binding itself: struct layouts, lifecycle, confinement, errors. */
class CapstoneTest {

    @Test
    void structLayoutsMatchTheCCompiler() {
        // offsetof/sizeof printed by gcc against Capstone 5.0.7's headers on x86-64
        assertEquals(248, CapstoneLayout.INSN.byteSize());
        assertEquals(8, CapstoneLayout.INSN_ADDRESS);
        assertEquals(16, CapstoneLayout.INSN_SIZE);
        assertEquals(18, CapstoneLayout.INSN_BYTES);
        assertEquals(42, CapstoneLayout.INSN_MNEMONIC);
        assertEquals(74, CapstoneLayout.INSN_OP_STR);
        assertEquals(240, CapstoneLayout.INSN_DETAIL);
        assertEquals(83, CapstoneLayout.DETAIL_GROUPS);
        assertEquals(91, CapstoneLayout.DETAIL_GROUPS_COUNT);
        assertEquals(96, CapstoneLayout.DETAIL_ARCH);
        assertEquals(464, CapstoneLayout.X86.byteSize());
        assertEquals(48, CapstoneLayout.X86_OP.byteSize());
        assertEquals(64, CapstoneLayout.X86_OP_COUNT);
        assertEquals(72, CapstoneLayout.X86_OPERANDS);
        assertEquals(456, CapstoneLayout.X86_ENC_MODRM_OFFSET);
        assertEquals(457, CapstoneLayout.X86_ENC_DISP_OFFSET);
        assertEquals(24, CapstoneLayout.X86_OP_MEM_DISP);
        assertEquals(32, CapstoneLayout.X86_OP_SIZE);
        assertEquals(456, CapstoneLayout.ARM64.byteSize());
        assertEquals(56, CapstoneLayout.ARM64_OP.byteSize());
        assertEquals(7, CapstoneLayout.ARM64_OP_COUNT);
        assertEquals(8, CapstoneLayout.ARM64_OPERANDS);
        assertEquals(20, CapstoneLayout.ARM64_OP_TYPE);
        assertEquals(32, CapstoneLayout.ARM64_OP_IMM);
    }

    @Test
    void disassemblesWithDetail() {
        try (Capstone cs = Capstone.open(Arch.X86_64)) {
            // call rel32 0: Capstone's call group is CS_GRP_CALL (2); operand 0 is the absolute target
            List<CsInstruction> out = cs.disassemble(new byte[] {(byte) 0xe8, 0, 0, 0, 0, (byte) 0x90}, 0x1000, 0);
            assertEquals(2, out.size());
            CsInstruction call = out.getFirst();
            assertEquals(5, call.length());
            assertTrue(call.groups().contains(CsInstruction.GROUP_CALL));
            CsInstruction.X86Detail d = assertInstanceOf(CsInstruction.X86Detail.class, call.detail());
            assertEquals(1, d.immOffset());
            assertEquals(4, d.immSize());
            assertEquals(0x1005, d.operands().getFirst().imm());
            assertEquals("nop", out.get(1).mnemonic());
        }
    }

    @Test
    void countLimitsTheResult() {
        try (Capstone cs = Capstone.open(Arch.X86_64)) {
            assertEquals(1, cs.disassemble(new byte[] {(byte) 0x90, (byte) 0x90, (byte) 0x90}, 0, 1).size());
            assertEquals(List.of(), cs.disassemble(new byte[0], 0, 0));
        }
    }

    @Test
    void closedHandleIsUnusable() {
        Capstone cs = Capstone.open(Arch.ARM64);
        cs.close();
        cs.close(); // idempotent
        assertThrows(IllegalStateException.class, () -> cs.disassemble(new byte[4], 0, 1));
    }

    @Test
    void handleIsConfinedToItsThread() throws InterruptedException {
        try (Capstone cs = Capstone.open(Arch.X86_64)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> CompletableFuture.runAsync(() -> cs.disassemble(new byte[] {(byte) 0x90}, 0, 1)).get());
            assertInstanceOf(WrongThreadException.class, e.getCause());
        }
    }

    @Test
    void strerrorIsCapstonesMessage() {
        // cs_err 2 is CS_ERR_ARCH
        assertTrue(Capstone.strerror(2).contains("architecture"), Capstone.strerror(2));
        CapstoneException e = new CapstoneException("cs_open", 2, Capstone.strerror(2));
        assertEquals(2, e.code());
        assertTrue(e.getMessage().startsWith("cs_open failed: "));
    }
}
