package dev.kpemu.optprobes;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.optprobes.Refusal.Reason;
import java.util.List;

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
 *     rel, no x87…, and no Grp2/Grp3/Grp4 form before Linux 6.9: {@link Candidate#groupFormsBoostable()}; {@link Reason#NOT_BOOSTABLE}). The RIP-relative range check of
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


    private OptimizationSafety() {}

    /** Checks {@code candidate} with the rules of {@code decoder}'s arch. */
    public static Verdict check(Decoder decoder, Candidate candidate) {
        return ArchOptimizer.of(decoder.arch()).check(decoder, candidate);
    }

    // ---------------------------------------------------------------- common

    static void reserved(Candidate c, TextRange region, List<Refusal> out) {
        for (TextRange r : c.reservedText()) {
            if (region.overlaps(r)) {
                out.add(new Refusal(Reason.RESERVED_TEXT, r.start(), "displaced region overlaps self-patched text " + r));
            }
        }
    }

    static void temporary(Candidate c, List<Refusal> out) {
        long p = c.probeAddress();
        if (c.postHandler()) out.add(new Refusal(Reason.POST_HANDLER, p, "the probe has a post handler"));
        if (!c.enabled()) out.add(new Refusal(Reason.DISABLED, p, "the probe is disabled"));
        if (!c.optimizationOn()) out.add(new Refusal(Reason.OPTIMIZATION_OFF, p, "debug.kprobes_optimization is 0"));
    }

    static Verdict refused(Reason reason, long address, String detail) {
        return new Verdict.Refused(List.of(new Refusal(reason, address, detail)), null);
    }

    static boolean inInclusive(long v, long first, long last) {
        return Long.compareUnsigned(v, first) >= 0 && Long.compareUnsigned(v, last) <= 0;
    }


    static int word(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }
}
