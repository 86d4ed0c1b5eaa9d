package dev.kpemu.decoder;

/**
 * Linux 6.x x86-64 kprobes decisions, by opcode: which instructions are emulated, refused or copied
 * ({@code prepare_emulation}, {@code __copy_instruction}) and which may be boosted ({@code can_boost}).
 *
 * <p>One deliberate difference: every {@link BranchKind#TRAP} instruction ({@code int n}, {@code into},
 * {@code int1}, {@code ud2}, {@code syscall}…) is refused, not only {@code int3}: run from a slot it
 * would enter its handler with the slot's address as the return address. The exception-table rule
 * of {@code can_boost} needs the kernel's tables and is left to the caller.
 */
final class X86ProbeRules {
    private X86ProbeRules() {}

    /** {@code twobyte_is_boostable[]}: row {@code 0xR0} lists opcodes {@code 0f R0} … {@code 0f Rf}. */
    private static final String[] TWO_BYTE_BOOSTABLE_ROWS = {
        "0011001011000000", // 00
        "0000000000000001", // 10
        "1111000000000000", // 20
        "0100000000000000", // 30
        "1111111111111111", // 40 cmovcc
        "0000000000000000", // 50
        "1111111111110011", // 60
        "0000111100000011", // 70
        "0000000000000000", // 80 jcc rel32: never
        "1111111111111111", // 90 setcc
        "1101110011011101", // a0
        "1111111100011111", // b0
        "1100000011111111", // c0
        "0111010011011101", // d0
        "0110010011011101", // e0
        "0111010011101110", // f0
    };
    private static final boolean[] TWO_BYTE_BOOSTABLE = new boolean[256];

    static {
        for (int row = 0; row < 16; row++) {
            for (int col = 0; col < 16; col++) {
                TWO_BYTE_BOOSTABLE[row * 16 + col] = TWO_BYTE_BOOSTABLE_ROWS[row].charAt(col) == '1';
            }
        }
    }

    /** Control-flow class of the instruction. */
    static BranchKind branchKind(X86Opcode op) {
        if (op.vex()) return BranchKind.NONE;
        if (op.length() == 1) {
            int b = op.first();
            if (b >= 0x70 && b <= 0x7f || b >= 0xe0 && b <= 0xe3) return BranchKind.CONDITIONAL_JUMP;
            return switch (b) {
                case 0xe8 -> BranchKind.CALL;
                case 0xe9, 0xeb -> BranchKind.JUMP;
                case 0xc2, 0xc3, 0xca, 0xcb, 0xcf -> BranchKind.RETURN;
                case 0xcc, 0xcd, 0xce, 0xf1 -> BranchKind.TRAP;
                case 0xff -> switch (op.reg()) {
                    case 2, 3 -> BranchKind.INDIRECT_CALL;
                    case 4, 5 -> BranchKind.INDIRECT_JUMP;
                    default -> BranchKind.NONE;
                };
                default -> BranchKind.NONE;
            };
        }
        if (op.length() == 2) {
            int b = op.opcode()[1];
            if (b >= 0x80 && b <= 0x8f) return BranchKind.CONDITIONAL_JUMP;
            return switch (b) {
                case 0x05, 0x34, 0x0b, 0xb9, 0xff -> BranchKind.TRAP; // syscall, sysenter, ud2, ud1, ud0
                case 0x07, 0x35 -> BranchKind.RETURN;                  // sysret, sysexit
                case 0x01 -> op.modrm() == 0xc1 || op.modrm() == 0xd9 ? BranchKind.TRAP : BranchKind.NONE; // vmcall, vmmcall
                default -> BranchKind.NONE;
            };
        }
        return BranchKind.NONE;
    }

    /** How the instruction can be run out of line. */
    static OutOfLine outOfLine(X86Opcode op, BranchKind kind, boolean ripRelative) {
        if (kind == BranchKind.TRAP) return OutOfLine.REJECT;
        if (!op.vex() && op.length() == 1) {
            int b = op.first();
            if (b >= 0x70 && b <= 0x7f || b >= 0xe0 && b <= 0xe3) return OutOfLine.SIMULATE;
            switch (b) {
                case 0x9a, 0xea, 0xcf, 0x1f: // far call, far jmp, iret, pop ss
                    return OutOfLine.REJECT;
                case 0x8e: // mov ss, r/m suppresses the single-step trap
                    if (op.reg() == 2) return OutOfLine.REJECT;
                    break;
                case 0xc2, 0xc3, 0xca, 0xcb, 0xe8, 0xe9, 0xeb, 0xfa, 0xfb, 0x9c, 0x9d:
                    return OutOfLine.SIMULATE;
                case 0xff:
                    if (op.reg() == 3 || op.reg() == 5) return OutOfLine.REJECT; // far indirect
                    if (op.reg() == 2 || op.reg() == 4) {
                        // only register-indirect with the native address size is emulated
                        return op.mod() == 3 && !op.hasPrefix(0x67) ? OutOfLine.SIMULATE : OutOfLine.REJECT;
                    }
                    break;
                default:
                    break;
            }
        }
        if (!op.vex() && op.length() == 2) {
            int b = op.opcode()[1];
            if (b >= 0x80 && b <= 0x8f) return OutOfLine.SIMULATE;
            if (b == 0x01 && op.mod() == 3 && op.reg() == 0) return OutOfLine.REJECT; // VMCALL/VMLAUNCH/VMRESUME/VMXOFF
        }
        return ripRelative ? OutOfLine.COPY_WITH_FIXUP : OutOfLine.COPY;
    }

    /** Linux's {@code can_boost}, false for refused instructions. */
    static boolean boostable(X86Opcode op, OutOfLine outOfLine) {
        if (outOfLine == OutOfLine.REJECT || op.vex()) return false;
        if (op.length() == 2) return TWO_BYTE_BOOSTABLE[op.opcode()[1]];   // before the prefixes, as in Linux
        if (op.length() != 1) return false;
        if (op.hasPrefix(0x2e) || op.hasPrefix(0x67)) return false;
        int b = op.first();
        if (b >= 0x70 && b <= 0x7f || b >= 0xcc && b <= 0xce || b >= 0xd0 && b <= 0xd3
                || b >= 0xd8 && b <= 0xdf || b >= 0xe0 && b <= 0xe3 || b >= 0xf0 && b <= 0xf4) {
            return false;
        }
        return switch (b) {
            case 0x62, 0x9a, 0xc0, 0xc1, 0xd6, 0xe8, 0xe9, 0xeb, 0xf6, 0xf7, 0xfe -> false;
            case 0xff -> op.reg() == 4;
            default -> true;
        };
    }
}
