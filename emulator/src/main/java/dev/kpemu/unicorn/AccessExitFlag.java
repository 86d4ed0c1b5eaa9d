package dev.kpemu.unicorn;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;

/**
 * Where Unicorn keeps the engine flag that leaves guest loads and stores without an exit check.
 *
 * <p>Unicorn 2.1.4's translator follows every guest load and store with a call to
 * {@code helper_check_exit_request} (its {@code check_exit_request} in {@code tcg/tcg-op.c}), so
 * that a stop asked for during the access (a memory hook's {@code uc_emu_stop}, a failed store)
 * ends the block right after it. Each call also makes the translated code save and reload the
 * guest registers it keeps in host registers. QEMU itself has no such call: it leaves a block
 * only at block starts. Unicorn skips the call while the engine's {@code no_exit_request} flag is
 * set (its workaround for ARM IT blocks); no API sets it. The translator still checks at every
 * block start, where kpemu's block hook stops the engine, so a machine that never stops the
 * engine from a memory callback loses nothing by setting it (measured in docs/reference.md,
 * "Guest loads and stores without Unicorn's exit check").
 *
 * <p>The flag is a byte of the engine's state ({@code struct uc_struct}, private to Unicorn):
 * its offset is read from libunicorn's own code. {@code check_exit_request_<arch>} starts by
 * loading the engine from its context and comparing that byte with zero ({@code mov
 * disp32(%rdi),%reg; cmpb $0x0,disp32(%reg)} on an x86-64 host); the second displacement is the
 * offset. The engine state is the same structure for every target, so the x86-64 and arm64
 * functions must agree. When the code does not have that shape (another build or host), the
 * offset is unknown and engines keep Unicorn's checks: slower, never wrong.
 */
final class AccessExitFlag {
    private AccessExitFlag() {}

    /** How far into the function the check may start (the prologue before it is some 30 bytes). */
    private static final int SCAN = 64;
    /** A sane bound on the offset: the engine state's flags lie in its first few KiB. */
    private static final int MAX_OFFSET = 1 << 16;

    /** The flag's offset in the engine state, or -1 when libunicorn's code does not show it. */
    static long find(SymbolLookup lib) {
        long x86 = offsetIn(lib, "check_exit_request_x86_64"), arm64 = offsetIn(lib, "check_exit_request_aarch64");
        return x86 >= 0 && x86 == arm64 ? x86 : -1;
    }

    private static long offsetIn(SymbolLookup lib, String symbol) {
        Optional<MemorySegment> f = lib.find(symbol);
        if (f.isEmpty()) return -1;
        byte[] code = f.get().reinterpret(SCAN + 16).toArray(JAVA_BYTE);
        return offsetIn(code);
    }

    /**
     * The displacement of the first {@code cmpb $0x0,disp32(%reg)} that directly follows a {@code
     * mov disp32(%rdi),%reg} (64-bit, a register without REX.R) in {@code code}, or -1.
     */
    static long offsetIn(byte[] code) {
        for (int i = 0; i + 14 <= code.length && i < SCAN; i++) {
            // REX.W 8B /r, mod 10 (disp32), rm 111 (rdi): mov disp32(%rdi), reg
            if ((code[i] & 0xff) != 0x48 || (code[i + 1] & 0xff) != 0x8b || (code[i + 2] & 0xc7) != 0x87) continue;
            int reg = (code[i + 2] >> 3) & 7;
            if (reg == 4 || reg == 5) continue;                        // rsp, rbp: a SIB byte or another form follows
            int j = i + 7;
            // 80 /7 ib, mod 10, rm = reg: cmpb $imm8, disp32(reg)
            if ((code[j] & 0xff) != 0x80 || (code[j + 1] & 0xff) != (0xb8 | reg)) continue;
            long disp = disp32(code, j + 2);
            if (code[j + 6] != 0 || disp <= 0 || disp >= MAX_OFFSET) return -1;
            return disp;
        }
        return -1;
    }

    /** The signed 32-bit little-endian displacement at {@code code[at]} (an x86-64 instruction's disp32). */
    static long disp32(byte[] code, int at) {
        return (code[at] & 0xffL) | (code[at + 1] & 0xffL) << 8 | (code[at + 2] & 0xffL) << 16 | (long) code[at + 3] << 24;
    }
}
