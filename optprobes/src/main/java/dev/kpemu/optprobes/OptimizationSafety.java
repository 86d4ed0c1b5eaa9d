package dev.kpemu.optprobes;

import dev.kpemu.decoder.BranchKind;
import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Disassembly;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.decoder.UndecodableInstructionException;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.Refusal.Reason;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Decides whether a probe may be jump-optimized, and which instructions the jump displaces.
 *
 * <h2>x86-64: Linux's rules</h2>
 * Linux 6.x {@code arch/x86/kernel/kprobes/opt.c} ({@code can_optimize},
 * {@code copy_optimized_instructions}, {@code arch_check_optimized_kprobe}) and
 * {@code kernel/kprobes.c} ({@code optimize_kprobe}), in this order:
 * <ol>
 * <li>The probe lies in the function ({@link Reason#NOT_IN_FUNCTION}), the function decodes linearly
 *     to its end ({@link Reason#FUNCTION_UNDECODABLE}), the probe is on an instruction boundary
 *     ({@code can_probe}, {@link Reason#NOT_ON_INSTRUCTION_BOUNDARY}).</li>
 * <li>The displaced code region (DCR) is the run of whole instructions from the probe that covers at
 *     least {@code JMP32_INSN_SIZE} = 5 bytes; it must end inside the function
 *     ({@code size - offset >= JMP32_INSN_SIZE}, kprobes.rst limitation d;
 *     {@link Reason#REGION_CROSSES_FUNCTION_END}).</li>
 * <li>Every instruction of the function: none has an {@code __ex_table} entry
 *     ({@code search_exception_tables}, {@link Reason#EXCEPTION_TABLE_ENTRY}) — the fixup code could
 *     jump back into the region; none is an indirect jump ({@code insn_is_indirect_jump}:
 *     {@code ff /4}, {@code ff /5}, {@code ea} — the jump-table heuristic: an indirect jump may go
 *     through a table into the region; with {@link Candidate#indirectThunks()} also a direct
 *     jump/jcc into the retpoline thunks, Linux &le; 5.x with {@code CONFIG_RETPOLINE};
 *     {@link Reason#INDIRECT_JUMP}; skipped when {@link Candidate#indirectJumpCheck()} is false, as 6.x
 *     does on retpoline/IBT kernels); no direct branch targets the jump-target prohibition region
 *     ({@code insn_jump_into_range(paddr + 1, 4)}: target in {@code [paddr+1, paddr+5]} inclusive;
 *     {@link Reason#JUMP_INTO_REGION}).</li>
 * <li>Every displaced instruction: not a call (limitation b, {@link Reason#CALL_IN_REGION}); copyable
 *     ({@code __copy_instruction}: not {@code int3}, not a trap, not {@code pop ss}/{@code mov ss},
 *     no far branch…; {@link Reason#NOT_RELOCATABLE}); boostable ({@code can_boost}: no jmp/jcc/loop
 *     rel, no Grp2/Grp3/x87…; {@link Reason#NOT_BOOSTABLE}). The RIP-relative range check of
 *     {@code __copy_instruction} needs the buffer address and is done by {@link DetourBuffer}.</li>
 * <li>The region overlaps no ftrace site ({@code ftrace_text_reserved}, {@link Reason#FTRACE_SITE}) and no
 *     other self-patched text ({@code alternatives/jump_label/static_call_text_reserved},
 *     {@link Reason#RESERVED_TEXT}).</li>
 * <li>Pre-optimization blockers (temporary): another probe at {@code paddr+1 .. paddr+size-1}
 *     ({@code arch_check_optimized_kprobe}, {@link Reason#PROBE_IN_REGION}); a post handler; the probe
 *     disabled; {@code debug.kprobes_optimization} off.</li>
 * </ol>
 * Two deliberate widenings, both towards caution and neither reachable by compiler output: the
 * prohibited targets are {@code [paddr+1, max(paddr+5, end-1)]} (a target strictly inside a longer
 * DCR can only be a mid-instruction jump), and direct <em>calls</em> are checked like jumps, as
 * kprobes.rst limitation c states (the code only inspects jumps). An exception-table entry anywhere
 * in the function refuses, not only one at a decoded instruction start (they coincide when the
 * function decodes completely, which is required).
 *
 * <h3>ftrace sites</h3>
 * A {@code call __fentry__} (on disk) or its boot-time replacement, the 5-byte NOP
 * {@code 0f 1f 44 00 00}, at the function entry (after an {@code endbr64}) is an ftrace site. Linux
 * arms a probe there through ftrace ({@code KPROBE_FLAG_FTRACE}, listed {@code [FTRACE]}) and never
 * optimizes it; a DCR that overlaps the site is refused with -EBUSY. kpemu does the same for a
 * stronger reason: the guest's own ftrace rewrites those 5 bytes whenever tracing is switched on or
 * off for the function, which would tear a jump written over them. The site is taken from
 * {@link Candidate#ftraceSites()} and, unless disabled, recognised at the entry by its bytes. A probe
 * placed <em>after</em> the site (on the first {@code push}) is optimized normally: the typical
 * Debian prologue {@code endbr64; nop5; push rbp; mov rbp,rsp; push r12} gives a 6-byte DCR
 * {@code push rbp; mov rbp,rsp; push r12}.
 *
 * <h2>arm64: kpemu's rules (Linux has no optprobes on arm64)</h2>
 * The displaced region is exactly the probed instruction: a {@code B imm26} is 4 bytes and replaces
 * one instruction, written by one aligned 32-bit store. Kept:
 * <ul>
 * <li>probe in the function and 4-byte aligned ({@link Reason#NOT_ON_INSTRUCTION_BOUNDARY});</li>
 * <li>the instruction can run out of line or be simulated (decoder {@link OutOfLine} not
 *     {@code REJECT}: Linux's {@code INSN_REJECTED}; {@link Reason#NOT_RELOCATABLE});</li>
 * <li>no exception-table entry <em>at the probed instruction</em> (Linux arm64 refuses to probe such
 *     an address at all; a fault in the detour copy would find no fixup for the buffer's pc);</li>
 * <li>not inside an LDXR…STXR sequence (Linux's {@code is_probed_address_atomic}, scanning back at
 *     most {@code MAX_ATOMIC_CONTEXT_SIZE} = 32 instructions: a store-exclusive found first means
 *     outside, a load-exclusive means inside; {@link Reason#ATOMIC_SEQUENCE}): the detour's frame
 *     stores and host hand-off may clear the exclusive monitor and livelock the sequence;</li>
 * <li>no ftrace site or other self-patched text at the instruction (arm64 ftrace patches the
 *     {@code -fpatchable-function-entry} NOPs; jump labels patch {@code b}/{@code nop});</li>
 * <li>with BTI enforced, the instruction is not a landing pad ({@code bti c|j|jc}, {@code paciasp},
 *     {@code pacibsp}): a {@code B} there would raise a Branch Target exception for indirect callers
 *     ({@link Reason#LANDING_PAD});</li>
 * <li>the temporary blockers: post handler, disabled, optimization off.</li>
 * </ul>
 * Dropped, because a one-instruction region makes them vacuous: jumps into the region (any branch to
 * the region lands on its first byte, the {@code B}, which is exactly entering at the probe), indirect
 * jumps and jump tables (same argument), exception-table entries elsewhere in the function (a fixup
 * can only branch to an instruction start, and the only one in the region is the probe address), and
 * other probes in the region (aligned addresses inside a 4-byte region are the probe address itself,
 * which is the same aggregate probe).
 */
public final class OptimizationSafety {
    /** x86 {@code JMP32_INSN_SIZE}: the jump written over the probe. */
    public static final int JMP32_INSN_SIZE = 5;
    /** x86 {@code INT3_INSN_SIZE}. */
    public static final int INT3_INSN_SIZE = 1;
    /** x86 {@code DISP32_SIZE}. */
    public static final int DISP32_SIZE = 4;
    /** arm64 instruction size. */
    public static final int AARCH64_INSN_SIZE = 4;
    /** arm64 {@code MAX_ATOMIC_CONTEXT_SIZE} in instructions (128 bytes / 4). */
    public static final int MAX_ATOMIC_CONTEXT_SIZE = dev.kpemu.decoder.Arm64ExclusiveWindow.MAX_ATOMIC_CONTEXT_SIZE;

    private static final byte[] NOP5 = {0x0f, 0x1f, 0x44, 0x00, 0x00};

    private OptimizationSafety() {}

    /** Checks {@code candidate} with the rules of {@code decoder}'s arch. */
    public static Verdict check(Decoder decoder, Candidate candidate) {
        return ArchOptimizer.of(decoder.arch()).check(decoder, candidate);
    }

    // ---------------------------------------------------------------- x86-64

    /** x86-64's rules ({@link X86Optimizer}). */
    static Verdict x86(Decoder decoder, Candidate c) {
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
            } else if (!i.boostable()) {
                out.add(new Refusal(Reason.NOT_BOOSTABLE, i.address(), "not boostable: " + i.text()));
            }
        }
        TextRange dcrRange = new TextRange(probe, region.end());
        Set<Long> ftrace = new TreeSet<>(c.ftraceSites());
        if (c.detectEntryFtraceSite()) x86EntryFtraceSite(fn.start(), c.functionBytes()).ifPresent(ftrace::add);
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
     * The ftrace site at an x86 function entry, recognised by its bytes: a 5-byte {@code call} or
     * {@code nop} at offset 0, or at offset 4 after an IBT landing pad ({@code endbr64}, or the
     * NOP the kernel or objtool sealed it with: Linux's {@code is_endbr} accepts both).
     */
    public static Optional<Long> x86EntryFtraceSite(long functionStart, byte[] bytes) {
        int off = bytes.length >= 4 && dev.kpemu.kprobes.x86.X86LandingPad.is(bytes[0], bytes[1], bytes[2], bytes[3])
                ? dev.kpemu.kprobes.x86.X86LandingPad.LENGTH : 0;
        if (bytes.length >= off + 5 && ((bytes[off] & 0xff) == 0xe8 || startsWith(bytes, off, NOP5))) {
            return Optional.of(functionStart + off);
        }
        return Optional.empty();
    }

    private static boolean isJump(Instruction i) {
        return (i.branchKind() == BranchKind.JUMP || i.branchKind() == BranchKind.CONDITIONAL_JUMP)
                && i.branchTarget().isPresent();
    }

    /** {@code ea}: far absolute jump (invalid in 64-bit mode, listed by {@code __insn_is_indirect_jump}). */
    private static boolean isFarJumpAbsolute(Instruction i) {
        byte[] b = i.bytes();
        int k = 0;
        while (k < b.length && isLegacyPrefixOrRex(b[k] & 0xff)) k++;
        return k < b.length && (b[k] & 0xff) == 0xea;
    }

    private static boolean isLegacyPrefixOrRex(int b) {
        return (b & 0xf0) == 0x40 || b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 || b == 0x3e
                || b == 0x26 || b == 0x64 || b == 0x65 || b == 0x66 || b == 0x67;
    }

    // ---------------------------------------------------------------- arm64

    private static final int HINT_MASK = 0xFFFFF01F, HINT = 0xD503201F;
    /** HINT numbers of landing pads: PACIASP 25, PACIBSP 27, BTI c 34, BTI j 36, BTI jc 38. */
    private static final Set<Integer> LANDING_PAD_HINTS = Set.of(25, 27, 34, 36, 38);

    /** arm64's rules ({@link Arm64Optimizer}). */
    static Verdict arm64(Decoder decoder, Candidate c) {
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
        if (c.landingPadsEnforced() && (w & HINT_MASK) == HINT && LANDING_PAD_HINTS.contains((w >>> 5) & 0x7f)) {
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

    // ---------------------------------------------------------------- common

    private static void reserved(Candidate c, TextRange region, List<Refusal> out) {
        for (TextRange r : c.reservedText()) {
            if (region.overlaps(r)) {
                out.add(new Refusal(Reason.RESERVED_TEXT, r.start(), "displaced region overlaps self-patched text " + r));
            }
        }
    }

    private static void temporary(Candidate c, List<Refusal> out) {
        long p = c.probeAddress();
        if (c.postHandler()) out.add(new Refusal(Reason.POST_HANDLER, p, "the probe has a post handler"));
        if (!c.enabled()) out.add(new Refusal(Reason.DISABLED, p, "the probe is disabled"));
        if (!c.optimizationOn()) out.add(new Refusal(Reason.OPTIMIZATION_OFF, p, "debug.kprobes_optimization is 0"));
    }

    private static Verdict refused(Reason reason, long address, String detail) {
        return new Verdict.Refused(List.of(new Refusal(reason, address, detail)), null);
    }

    private static boolean inInclusive(long v, long first, long last) {
        return Long.compareUnsigned(v, first) >= 0 && Long.compareUnsigned(v, last) <= 0;
    }

    private static boolean startsWith(byte[] b, int off, byte[] prefix) {
        if (b.length < off + prefix.length) return false;
        for (int k = 0; k < prefix.length; k++) if (b[off + k] != prefix[k]) return false;
        return true;
    }

    static int word(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }
}
