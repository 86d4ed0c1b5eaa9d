package dev.kpemu.optprobes;

import static dev.kpemu.optprobes.OptimizationSafety.*;

import dev.kpemu.decoder.BranchKind;
import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Disassembly;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.decoder.X86Opcode;
import dev.kpemu.kprobes.x86.X86KernelText;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.Refusal.Reason;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/** x86-64's optimization rules: Linux's {@code arch/x86/kernel/kprobes/opt.c}, as {@link OptimizationSafety} describes them. */
final class X86OptimizationRules {
    private X86OptimizationRules() {}

    /** x86-64's rules ({@link X86Optimizer}). */
    static Verdict check(Decoder decoder, Candidate c) {
        TextRange fn = c.function();
        long probe = c.probeAddress();
        if (!fn.contains(probe)) {
            return refused(Reason.NOT_IN_FUNCTION, probe, "probe outside function " + fn);
        }
        Disassembly dis = decoder.decodeAll(c.functionBytes(), fn.start());
        if (!dis.complete()) {
            long at = dis.undecodableAt().getAsLong();
            return refused(Reason.FUNCTION_UNDECODABLE, at, String.format("undecodable bytes at %#x", at));
        }
        if (!dis.isBoundary(probe)) {
            return refused(Reason.NOT_ON_INSTRUCTION_BOUNDARY, probe, "probe inside an instruction");
        }
        if (fn.end() - probe < JMP32_INSN_SIZE) {
            return refused(Reason.REGION_CROSSES_FUNCTION_END, probe,
                    String.format("only %d bytes to the function end %#x", fn.end() - probe, fn.end()));
        }
        List<Instruction> dcr = new ArrayList<>();
        for (long a = probe; a - probe < JMP32_INSN_SIZE; ) {
            Optional<Instruction> i = dis.at(a);
            if (i.isEmpty()) { // only at the function end: the decode is complete
                return refused(Reason.REGION_CROSSES_FUNCTION_END, a, "displaced region runs past " + fn);
            }
            dcr.add(i.get());
            a = i.get().nextAddress();
        }
        DisplacedRegion region = new DisplacedRegion(Arch.X86_64, probe, dcr);
        List<Refusal> out = new ArrayList<>();

        // can_optimize: the whole function
        for (long entry : new TreeSet<>(c.exceptionTable())) {
            if (fn.contains(entry)) {
                out.add(new Refusal(Reason.EXCEPTION_TABLE_ENTRY, entry,
                        "exception-table entry for " + dis.at(entry).map(Instruction::text).orElse("a non-boundary address")));
            }
        }
        long prohibitedFirst = probe + INT3_INSN_SIZE;
        long prohibitedLast = Math.max(probe + INT3_INSN_SIZE + DISP32_SIZE, region.end() - 1);
        for (Instruction i : dis.instructions()) {
            if (c.indirectJumpCheck()) {
                if (i.branchKind() == BranchKind.INDIRECT_JUMP || isFarJumpAbsolute(i)) {
                    out.add(new Refusal(Reason.INDIRECT_JUMP, i.address(), "indirect jump " + i.text()));
                } else if (c.indirectThunks() != null && isJump(i)
                        && inInclusive(i.branchTarget().getAsLong(), c.indirectThunks().start(), c.indirectThunks().end())) {
                    out.add(new Refusal(Reason.INDIRECT_JUMP, i.address(), "retpoline jump " + i.text()));
                }
            }
            if (i.branchKind().isDirect() && i.branchTarget().isPresent()
                    && inInclusive(i.branchTarget().getAsLong(), prohibitedFirst, prohibitedLast)) {
                out.add(new Refusal(Reason.JUMP_INTO_REGION, i.address(), String.format(
                        "%s targets the jump-target prohibition region [%#x, %#x]", i.text(), prohibitedFirst, prohibitedLast)));
            }
        }
        // copy_optimized_instructions: each displaced instruction
        for (Instruction i : dcr) {
            if (i.branchKind() == BranchKind.CALL || i.branchKind() == BranchKind.INDIRECT_CALL) {
                out.add(new Refusal(Reason.CALL_IN_REGION, i.address(), "call in the displaced region: " + i.text()));
            } else if (i.outOfLine() == OutOfLine.REJECT) {
                out.add(new Refusal(Reason.NOT_RELOCATABLE, i.address(), "cannot run out of line: " + i.text()));
            } else if (!i.boostable() && !(c.groupFormsBoostable() && groupFormBoostable(X86Opcode.parse(i.bytes())))) {
                out.add(new Refusal(Reason.NOT_BOOSTABLE, i.address(), "not boostable: " + i.text()));
            }
        }
        TextRange dcrRange = new TextRange(probe, region.end());
        Set<Long> ftrace = new TreeSet<>(c.ftraceSites());
        if (c.detectEntryFtraceSite()) entryFtraceSite(fn.start(), c.functionBytes()).ifPresent(ftrace::add);
        for (long site : ftrace) {
            if (dcrRange.overlaps(TextRange.of(site, JMP32_INSN_SIZE))) {
                out.add(new Refusal(Reason.FTRACE_SITE, site, "displaced region overlaps the ftrace site"));
            }
        }
        reserved(c, dcrRange, out);
        // pre-optimization blockers
        for (long other : new TreeSet<>(c.otherProbes())) {
            if (region.interior(other)) {
                out.add(new Refusal(Reason.PROBE_IN_REGION, other, "another probe in the displaced region"));
            }
        }
        temporary(c, out);
        return out.isEmpty() ? new Verdict.Optimizable(region) : new Verdict.Refused(out, region);
    }

    /**
     * The ftrace site at an x86 function entry, recognised by its bytes ({@link X86KernelText}:
     * a 5-byte {@code call} or {@code nop} at offset 0, or at offset 4 after an IBT landing pad).
     */
    static Optional<Long> entryFtraceSite(long functionStart, byte[] bytes) {
        int off = X86KernelText.INSTANCE.ftraceSite(bytes);
        return off < 0 ? Optional.empty() : Optional.of(functionStart + off);
    }

    /**
     * The opcode-group forms Linux's {@code can_boost} accepts from 6.9 on (kernel commit "x86/kprobes:
     * Boost more instructions from grp2/3/4/5", February 2024): group 2 but {@code /6}, group 3 but
     * {@code /1} (both reserved on Intel), {@code inc} and {@code dec} of groups 4 and 5. Before, no
     * form of groups 2&ndash;4 and only group 5's indirect {@code jmp} (which the decoder already
     * reports as boostable).
     */
    static boolean groupFormBoostable(X86Opcode op) {
        if (op.vex() || op.length() != 1 || op.hasPrefix(0x2e) || op.hasPrefix(0x67)) return false;
        return switch (op.first()) {
            case 0xc0, 0xc1, 0xd0, 0xd1, 0xd2, 0xd3 -> op.reg() != 6;
            case 0xf6, 0xf7 -> op.reg() != 1;
            case 0xfe, 0xff -> op.reg() == 0 || op.reg() == 1;
            default -> false;
        };
    }

    private static boolean isJump(Instruction i) {
        return (i.branchKind() == BranchKind.JUMP || i.branchKind() == BranchKind.CONDITIONAL_JUMP)
                && i.branchTarget().isPresent();
    }

    /** {@code ea}: far absolute jump (invalid in 64-bit mode, listed by {@code __insn_is_indirect_jump}). */
    private static boolean isFarJumpAbsolute(Instruction i) {
        return X86Opcode.parse(i.bytes()).isOneByte(0xea);
    }
}
