package dev.kpemu.decoder;

/** How an instruction changes the flow of control. */
public enum BranchKind {
    /** Falls through to the next instruction. */
    NONE,
    /** Unconditional direct jump ({@code jmp rel}, {@code b}); the target is known. */
    JUMP,
    /** Conditional direct branch ({@code jcc}, {@code loop}, {@code jrcxz}, {@code b.cond}, {@code cbz}, {@code tbz}…). */
    CONDITIONAL_JUMP,
    /** Direct call ({@code call rel32}, {@code bl}); the target is known. */
    CALL,
    /** Return: {@code ret}, {@code iret}, {@code sysret}; arm64 {@code ret}, {@code eret}, {@code drps}. */
    RETURN,
    /** Jump through a register or memory ({@code jmp rax}, {@code jmp [rip+x]}, {@code br}). */
    INDIRECT_JUMP,
    /** Call through a register or memory ({@code call rax}, {@code blr}). */
    INDIRECT_CALL,
    /**
     * Enters an exception/trap handler: breakpoints, software interrupts, system and hyper calls,
     * permanently undefined instructions ({@code int3}, {@code int n}, {@code into}, {@code int1},
     * {@code syscall}, {@code sysenter}, {@code ud2}, {@code vmcall}; {@code svc}, {@code hvc},
     * {@code smc}, {@code brk}, {@code hlt}, {@code dcps}, {@code udf}).
     */
    TRAP;

    /** True for the direct branches whose target is encoded in the instruction. */
    public boolean isDirect() {
        return this == JUMP || this == CONDITIONAL_JUMP || this == CALL;
    }
}
