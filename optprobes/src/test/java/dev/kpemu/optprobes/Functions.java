package dev.kpemu.optprobes;

import dev.kpemu.machine.Arch;
import java.util.LinkedHashMap;
import java.util.Map;

/** Guest functions of the engine-level tests, per arch. */
final class Functions {
    private Functions() {}

    /** f(v) = 3v + 1 behind a typical prologue. */
    static final String X86_PROLOGUE = """
            push %rbp
            mov %rsp, %rbp
            push %r12
            push %rbx
            mov %rdi, %rbx
            lea 1(%rbx,%rbx,2), %rax
            pop %rbx
            pop %r12
            pop %rbp
            ret
            """;
    static final String A64_PROLOGUE = """
            stp x29, x30, [sp, #-16]!
            mov x29, sp
            mov x1, #3
            mul x0, x0, x1
            add x0, x0, #1
            ldp x29, x30, [sp], #16
            ret
            """;
    /** mul_loop(n): n iterations of a mixed-register body (as the kprobes module's million-hit test). */
    static final String X86_MUL_LOOP = """
            mov %rdi, %rcx
            mov $1, %rax
            mov $3, %rbx
            1: imul %rbx, %rax
            add %rcx, %rax
            xor %rax, %rbx
            lea 7(%rbx,%rcx,2), %rbx
            dec %rcx
            jnz 1b
            ret
            """;
    static final String A64_MUL_LOOP = """
            mov x2, x0
            mov x0, #1
            mov x1, #3
            loop:
            mul x0, x0, x1
            add x0, x0, x2
            eor x1, x1, x0
            add x1, x1, x2, lsl #1
            subs x2, x2, #1
            b.ne loop
            ret
            """;

    static Map<String, String> of(Arch arch, String... nameSourcePairs) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < nameSourcePairs.length; i += 2) m.put(nameSourcePairs[i], nameSourcePairs[i + 1]);
        return m;
    }

    static Map<String, String> basic(Arch arch) {
        return arch == Arch.X86_64
                ? of(arch, "prologue", X86_PROLOGUE, "mul_loop", X86_MUL_LOOP)
                : of(arch, "prologue", A64_PROLOGUE, "mul_loop", A64_MUL_LOOP);
    }
}
