package dev.kpemu.optprobes;

import static dev.kpemu.optprobes.OptimizationSafety.*;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.decoder.UndecodableInstructionException;
import dev.kpemu.kprobes.arm64.Arm64LandingPad;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.Refusal.Reason;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;

/** arm64's optimization rules, kpemu's extension, as {@link OptimizationSafety} describes them. */
final class Arm64OptimizationRules {
    private Arm64OptimizationRules() {}

    /** arm64's rules ({@link Arm64Optimizer}). */
    static Verdict check(Decoder decoder, Candidate c) {
        TextRange fn = c.function();
        long probe = c.probeAddress();
        if (!fn.contains(probe)) {
            return refused(Reason.NOT_IN_FUNCTION, probe, "probe outside function " + fn);
        }
        if ((probe & 3) != 0 || ((probe - fn.start()) & 3) != 0) {
            return refused(Reason.NOT_ON_INSTRUCTION_BOUNDARY, probe, "probe not 4-byte aligned");
        }
        if (fn.end() - probe < AARCH64_INSN_SIZE) {
            return refused(Reason.REGION_CROSSES_FUNCTION_END, probe, "instruction runs past " + fn);
        }
        byte[] bytes = c.functionBytes();
        int off = (int) (probe - fn.start());
        Instruction insn;
        try {
            insn = decoder.decodeOne(Arrays.copyOfRange(bytes, off, off + AARCH64_INSN_SIZE), probe);
        } catch (UndecodableInstructionException e) {
            return refused(Reason.NOT_RELOCATABLE, probe, "undecodable instruction");
        }
        DisplacedRegion region = new DisplacedRegion(Arch.ARM64, probe, List.of(insn));
        List<Refusal> out = new ArrayList<>();
        if (c.exceptionTable().contains(probe)) {
            out.add(new Refusal(Reason.EXCEPTION_TABLE_ENTRY, probe, "exception-table entry for " + insn.text()));
        }
        if (insn.outOfLine() == OutOfLine.REJECT) {
            out.add(new Refusal(Reason.NOT_RELOCATABLE, probe, "cannot run out of line or be simulated: " + insn.text()));
        }
        int k = dev.kpemu.decoder.Arm64ExclusiveWindow.openLoadExclusive(bytes, off);
        if (k > 0) {
            out.add(new Refusal(Reason.ATOMIC_SEQUENCE, probe - 4L * k,
                    "probe follows a load-exclusive with no store-exclusive in between"));
        }
        int w = word(bytes, off);
        if (c.landingPadsEnforced() && Arm64LandingPad.is(w)) {
            out.add(new Refusal(Reason.LANDING_PAD, probe, "indirect-branch landing pad " + insn.text()));
        }
        TextRange insnRange = TextRange.of(probe, AARCH64_INSN_SIZE);
        for (long site : new TreeSet<>(c.ftraceSites())) {
            if (insnRange.overlaps(TextRange.of(site, AARCH64_INSN_SIZE))) {
                out.add(new Refusal(Reason.FTRACE_SITE, site, "probed instruction is an ftrace site"));
            }
        }
        reserved(c, insnRange, out);
        temporary(c, out);
        return out.isEmpty() ? new Verdict.Optimizable(region) : new Verdict.Refused(out, region);
    }
}
