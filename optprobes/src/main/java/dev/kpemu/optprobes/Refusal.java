package dev.kpemu.optprobes;

import java.util.Objects;

/**
 * Why a probe is not jump-optimized, with the address that caused it.
 *
 * @param reason  the rule that refused
 * @param address the instruction or entry responsible (the probe address when nothing more precise exists)
 * @param detail  a human-readable explanation (the offending instruction, the range…)
 */
public record Refusal(Reason reason, long address, String detail) {

    public Refusal {
        Objects.requireNonNull(reason);
        Objects.requireNonNull(detail);
    }

    /**
     * The safety rules. Linux's names are given where Linux has the rule; {@link #temporary()}
     * reasons are the pre-optimization blockers, which Linux re-examines whenever the probe
     * changes (the probe stays a breakpoint probe meanwhile); the others are permanent for this
     * probe address.
     */
    public enum Reason {
        /** The probe address is not inside the given function (Linux: {@code kallsyms_lookup_size_offset} fails). */
        NOT_IN_FUNCTION(false),
        /** The function does not decode linearly to its end (Linux {@code can_optimize}: decode failure). */
        FUNCTION_UNDECODABLE(false),
        /** The probe is not on an instruction boundary (x86 {@code can_probe}; arm64: not 4-byte aligned). */
        NOT_ON_INSTRUCTION_BOUNDARY(false),
        /**
         * The displaced region would cross the end of the function (Linux {@code can_optimize}:
         * {@code size - offset < JMP32_INSN_SIZE}; kprobes.rst limitation d).
         */
        REGION_CROSSES_FUNCTION_END(false),
        /** The function contains an instruction covered by an exception-table entry ({@code search_exception_tables}). */
        EXCEPTION_TABLE_ENTRY(false),
        /**
         * The function contains an indirect jump, which may be a jump table into the region
         * ({@code insn_is_indirect_jump}: {@code ff /4}, {@code ff /5}, {@code ea}, and with retpolines a
         * direct jump into the {@code __x86_indirect_thunk_*} range).
         */
        INDIRECT_JUMP(false),
        /** A direct jump (or call) in the function targets the jump-target prohibition region ({@code insn_jump_into_range}). */
        JUMP_INTO_REGION(false),
        /** A displaced instruction is a call (kprobes.rst limitation b; {@code can_boost} refuses {@code e8}, {@code ff /2}). */
        CALL_IN_REGION(false),
        /** A displaced instruction cannot run out of line ({@code __copy_instruction}; arm64 {@code INSN_REJECTED}). */
        NOT_RELOCATABLE(false),
        /** A displaced instruction is not boostable ({@code can_boost}): jumps, jcc, loop, Grp2/3… (x86). */
        NOT_BOOSTABLE(false),
        /** The region overlaps an ftrace call site ({@code ftrace_text_reserved}; kprobes on ftrace are never optimized). */
        FTRACE_SITE(false),
        /** The region overlaps text the guest patches itself: alternatives, jump labels, static calls ({@code *_text_reserved}, -EBUSY). */
        RESERVED_TEXT(false),
        /** arm64: the probe sits inside an LDXR…STXR sequence ({@code is_probed_address_atomic}). */
        ATOMIC_SEQUENCE(false),
        /** arm64, when BTI is enforced: the probed instruction is an indirect-branch landing pad (kpemu rule). */
        LANDING_PAD(false),
        /** The detour buffer is out of branch range, or a RIP-relative displacement no longer fits (-ERANGE). */
        OUT_OF_RANGE(false),
        /** Another probe lies inside the displaced region ({@code arch_check_optimized_kprobe}, -EEXIST). */
        PROBE_IN_REGION(true),
        /** The probe has a post handler ({@code optimize_kprobe}: {@code kprobe_aggrprobe} with a post_handler). */
        POST_HANDLER(true),
        /** The probe is disabled ({@code kprobe_disabled}). */
        DISABLED(true),
        /** Jump optimization is switched off ({@code debug.kprobes_optimization} = 0). */
        OPTIMIZATION_OFF(true);

        private final boolean temporary;

        Reason(boolean temporary) {
            this.temporary = temporary;
        }

        /** True for pre-optimization blockers that clear when the probe or its neighbours change. */
        public boolean temporary() {
            return temporary;
        }
    }

    @Override
    public String toString() {
        return String.format("%s at %#x: %s", reason, address, detail);
    }
}
