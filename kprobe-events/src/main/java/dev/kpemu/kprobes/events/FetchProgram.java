package dev.kpemu.kprobes.events;

import java.util.Arrays;
import java.util.OptionalLong;
import java.util.StringJoiner;

/**
 * A compiled fetch argument: the kernel's {@code fetch_insn} sequence (at most
 * {@code FETCH_INSN_MAX} = 16 instructions: one load, dereferences, one store, an optional
 * bitfield modifier and array loop, END). Built once by the parser, resolved against the
 * kernel's symbols at registration ({@code @SYM}), and run on every hit by
 * {@link CompiledProbe} without allocating.
 */
public final class FetchProgram {
    // operations (names follow enum fetch_op)
    static final int NOP = 0, REG = 1, STACK = 2, STACKP = 3, RETVAL = 4, IMM = 5, COMM = 6,
            DATA = 7, ARG = 8, NOP_SYMBOL = 9, DEREF = 10, UDEREF = 11, ST_RAW = 12, ST_MEM = 13,
            ST_UMEM = 14, ST_STRING = 15, ST_USTRING = 16, ST_SYMSTR = 17, MOD_BF = 18,
            LP_ARRAY = 19, END = 20, EDATA = 21, BADDR = 22, FOFFS = 23;
    private static final String[] NAMES = {"NOP", "REG", "STACK", "STACKP", "RETVAL", "IMM",
            "COMM", "DATA", "ARG", "NOP_SYMBOL", "DEREF", "UDEREF", "ST_RAW", "ST_MEM", "ST_UMEM",
            "ST_STRING", "ST_USTRING", "ST_SYMSTR", "MOD_BF", "LP_ARRAY", "END", "EDATA", "BADDR", "FOFFS"};

    /** One instruction. Mutable only while the parser builds it. */
    static final class Insn {
        int op = NOP;
        int param;      // register slot, stack index, arg index, array count
        long offset;    // deref / store offset
        int size;       // store size
        long imm;       // immediate / resolved address
        String data;    // NOP_SYMBOL spec (byte string)
        byte[] bytes;   // DATA bytes (immediate string, without NUL)
        int lshift, rshift, basesize;

        Insn copy() {
            Insn c = new Insn();
            c.op = op; c.param = param; c.offset = offset; c.size = size; c.imm = imm;
            c.data = data; c.bytes = bytes; c.lshift = lshift; c.rshift = rshift; c.basesize = basesize;
            return c;
        }

        @Override public String toString() {
            return switch (op) {
                case REG, STACK, ARG -> NAMES[op] + "(" + param + ")";
                case IMM -> "IMM(0x" + Long.toHexString(imm) + ")";
                case NOP_SYMBOL -> "SYMBOL(" + Bytes.decode(data) + ")";
                case DEREF, UDEREF, EDATA -> NAMES[op] + "(" + offset + ")";
                case ST_RAW, ST_MEM, ST_UMEM, ST_STRING, ST_USTRING, ST_SYMSTR -> NAMES[op] + "(" + offset + "," + size + ")";
                case MOD_BF -> "MOD_BF(" + basesize + "," + lshift + "," + rshift + ")";
                case LP_ARRAY -> "LP_ARRAY(" + param + ")";
                default -> NAMES[op];
            };
        }
    }

    final Insn[] code;
    final boolean dynamic;
    final int storeSize;

    FetchProgram(Insn[] code, boolean dynamic, int storeSize) {
        this.code = code;
        this.dynamic = dynamic;
        this.storeSize = storeSize;
    }

    /** Whether operation {@code op} may read guest memory (anything not known to read only registers or the record). */
    static boolean readsMemory(int op) {
        return switch (op) {
            case NOP, REG, STACKP, RETVAL, IMM, COMM, DATA, NOP_SYMBOL, ST_RAW, MOD_BF, LP_ARRAY, END, EDATA -> false;
            default -> true;
        };
    }

    /** Number of instructions including END. */
    public int length() { return code.length; }

    /** Whether the value is a string in the dynamic area. */
    public boolean dynamic() { return dynamic; }

    /** Whether {@code @SYM} references still need {@link #resolve}. */
    public boolean needsSymbols() {
        for (Insn i : code) if (i.op == NOP_SYMBOL) return true;
        return false;
    }

    /**
     * {@code traceprobe_update_arg}: resolves every {@code @SYM[+|-off]} to an address.
     * Returns null when a symbol is unknown (the kernel fails registration with -ENOENT).
     */
    FetchProgram resolve(KernelSymbols symbols) {
        if (!needsSymbols()) return this;
        Insn[] c = new Insn[code.length];
        for (int i = 0; i < c.length; i++) c[i] = code[i].copy();
        for (int i = 0; i < c.length; i++) {
            if (c[i].op != NOP_SYMBOL) continue;
            if (i + 1 >= c.length || c[i + 1].op != IMM) return null;
            String spec = c[i].data;
            int cut = -1;
            for (int k = 0; k < spec.length(); k++) {
                char ch = spec.charAt(k);
                if (ch == '+' || ch == '-') { cut = k; break; }
            }
            long off = 0;
            String sym = spec;
            if (cut >= 0) {
                Long o = Bytes.kstrtoll(spec.substring(cut), 0);
                if (o == null) return null;
                off = o;
                sym = spec.substring(0, cut);
            }
            OptionalLong addr = symbols.lookupName(Bytes.decode(sym));
            if (addr.isEmpty() || addr.getAsLong() == 0) return null;
            c[i + 1].imm = addr.getAsLong() + off;
        }
        return new FetchProgram(c, dynamic, storeSize);
    }

    @Override public String toString() {
        StringJoiner j = new StringJoiner(" ");
        for (Insn i : code) j.add(i.toString());
        return j.toString();
    }

    @Override public boolean equals(Object o) {
        return o instanceof FetchProgram p && Arrays.toString(code).equals(Arrays.toString(p.code));
    }

    @Override public int hashCode() { return Arrays.toString(code).hashCode(); }
}
