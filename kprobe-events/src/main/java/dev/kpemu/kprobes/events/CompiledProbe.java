package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.RecordedProbeHits;
import dev.kpemu.machine.Arch;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.IntUnaryOperator;

import static dev.kpemu.kprobes.events.FetchProgram.*;

/**
 * A registered probe's fetch plans and record layout, ready to run on every hit.
 *
 * <p>{@link #fetch} produces the argument area of the kernel's trace entry (what follows
 * {@code struct kprobe_trace_entry_head}): each argument at its field offset, little-endian,
 * strings as {@code __data_loc} words ({@code len << 16 | offset}, offset from the start of
 * the argument area) pointing into the dynamic data appended after the fixed part. Failed
 * reads leave numbers 0.
 *
 * <p>Dynamic data follows Linux's {@code store_trace_args} as Debian's 6.1, 6.12 and 7.2 run it
 * (recorded under QEMU: the corpus, seed 11, and {@code guest-images/reference/fetchquirks}): the entry reserves the sum of every dynamic argument's size
 * ({@code __get_data_size}: a string's length with its NUL, nothing for one that faults); before
 * each dynamic argument its {@code __data_loc} word is set to (bytes still reserved, current end
 * of the dynamic data), and only a positive result advances that end. Hence:
 * <ul>
 * <li>a string whose final read faults gets length 0 and prints {@code (fault)};</li>
 * <li>a string whose <em>dereference</em> faults before the string is read keeps the preset word:
 *     a non-zero length pointing where the next dynamic argument stores its text, so it prints
 *     that text ({@code a=+0(+0(%di)):string b=\"kp"} prints {@code a="kp" b="kp"}); with nothing
 *     reserved after it, length 0 and {@code (fault)};</li>
 * <li>{@code symstr} stores the symbol and its NUL but keeps the preset word and advances by the
 *     symbol's length only, so the next dynamic argument overwrites the NUL and the symbol prints
 *     run together with it ({@code a=$stack0:symstr b=\"x"} prints
 *     {@code a="dcache_readdir+0x1ce/0x250x" b="x"}).</li>
 * </ul>
 */
public final class CompiledProbe {
    /** {@code MAX_STRING_SIZE} (PATH_MAX): the longest stored string including its NUL. */
    public static final int MAX_STRING_SIZE = 4096;
    /** {@code BUF_MAX_DATA_SIZE} of a 4 KiB ring-buffer page: larger entries are dropped. */
    public static final int MAX_EVENT_SIZE = 4072;
    /** Size of {@code struct trace_entry} (the common fields). */
    public static final int COMMON_SIZE = 8;

    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle SHORT = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);

    private final TraceProbe definition;
    private final RegisterSet regs;
    /** A uprobe's program: {@code $stackN} reads the user stack ({@code get_user_stack_nth}). */
    private final boolean user;
    private final FetchProgram[] programs;
    private final int[] offsets;
    private final int fixedSize;
    private final boolean printsSymbols;
    private final boolean readsMemory;

    private CompiledProbe(TraceProbe definition, Arch arch, FetchProgram[] programs, int[] offsets, int fixedSize) {
        this.definition = definition;
        this.regs = RegisterSet.of(arch);
        this.user = definition instanceof UprobeDef;
        this.programs = programs;
        this.offsets = offsets;
        this.fixedSize = fixedSize;
        this.printsSymbols = definition.args().stream().anyMatch(a -> a.type() == FetchType.SYMBOL);
        this.args = definition.args().toArray(new FetchArg[0]);
        boolean reads = false;
        for (FetchProgram p : programs) for (FetchProgram.Insn i : p.code) reads |= FetchProgram.readsMemory(i.op);
        this.readsMemory = reads;
    }

    /**
     * Resolves {@code @SYM} references ({@code traceprobe_update_arg}) and lays out the record.
     *
     * @throws ProbeSyntaxException {@code BAD_PROBE_ADDR} at the place token with ENOENT when a
     *                              symbol is unknown, as the kernel's registration reports it
     */
    public static CompiledProbe compile(TraceProbe def, Arch arch, KernelSymbols symbols) throws ProbeSyntaxException {
        List<FetchArg> args = def.args();
        FetchProgram[] programs = new FetchProgram[args.size()];
        int[] offsets = new int[args.size()];
        int size = 0;
        for (int i = 0; i < programs.length; i++) {
            FetchArg a = args.get(i);
            FetchProgram p = a.program().resolve(symbols);
            if (p == null)
                throw ProbeSyntaxException.registration(def.command(), 1, 0, KernelError.BAD_PROBE_ADDR, Errno.ENOENT);
            programs[i] = p;
            offsets[i] = size;
            size += a.fieldSize();
        }
        return new CompiledProbe(def, arch, programs, offsets, size);
    }

    public TraceProbe definition() { return definition; }

    /** The definition's arguments as an array (a hit's formatting iterates them: no list call per argument). */
    private final FetchArg[] args;

    /** Argument {@code i} of the definition. */
    public FetchArg arg(int i) { return args[i]; }

    /** How many arguments the definition has. */
    public int argCount() { return args.length; }

    /** Whether an argument prints as a symbol ({@code :symbol}), which needs the symbol table when it is formatted. */
    public boolean printsSymbols() { return printsSymbols; }

    /**
     * Whether an argument reads guest memory: a dereference, a string ({@code $comm} included),
     * {@code $stackN}, an argument past the registers, a symbol's value; not registers,
     * {@code $retval}, {@code $stack}, immediates, entry data.
     */
    public boolean readsMemory() { return readsMemory; }

    /**
     * The reads of guest memory {@link #fetch} makes at a hit, for the machine's native code to
     * make there instead ({@link RecordedProbeHits.Read}): when every argument that reads memory is
     * a register ({@code %REG}, or {@code $argN} in a register) followed by dereferences and a store
     * of a number ({@code +8(%di):u32}, {@code +0(+16(%si)):x64}, a bitfield of one) or of a kernel
     * string ({@code +0(+0(%dx)):string}), no array; user memory ({@code +u0(%si):u8},
     * {@code +0(%si):ustring}) too; else null. {@code indexOfSlot} gives a pt_regs slot's index among the
     * record's registers (negative: not recorded, then null). Empty when nothing is read. The reads
     * are the ones {@link #run} makes, in order, with their sizes: a replay reads each back by its
     * address and size.
     */
    public RecordedProbeHits.Read[] recordedReads(IntUnaryOperator indexOfSlot) {
        NativePlan p = nativePlan(indexOfSlot);
        return p == null ? null : p.reads;
    }

    /** Whether {@link #recordedReads} can plan this probe's reads when its registers are recorded. */
    public boolean plansReads() {
        if (plansReads == 0) plansReads = nativePlan(slot -> slot) != null ? 1 : -1;
        return plansReads > 0;
    }

    private int plansReads;

    /**
     * For a line the machine's native code formats ({@code kpemu_probe_hits.h}): per argument where
     * its value is in a record ({@code indexOfSlot}'s register index, or {@link #LINE_READ} + the
     * read's index among {@link #recordedReads}), how it prints (0 hex, 1 unsigned, 2 signed
     * decimal) and its size, when every argument is a number stored raw from a register or a
     * planned read ({@code ST_RAW} after dereferences, or {@code ST_MEM}), no bitfield, no array;
     * else null.
     */
    public int[] lineArgs(IntUnaryOperator indexOfSlot) {
        NativePlan p = nativePlan(indexOfSlot);
        return p == null ? null : p.lineArgs;
    }

    /** A {@link #lineArgs} value at or past this is a planned read's. */
    public static final int LINE_READ = 128;

    /** A {@link #lineArgs} kind: a string read, printed as its bytes in double quotes (kinds 0, 1, 2: hex, unsigned, signed). */
    public static final int LINE_STRING = 3;

    /** {@link #recordedReads} and {@link #lineArgs} (null: an argument the native code cannot print). */
    private record NativePlan(RecordedProbeHits.Read[] reads, int[] lineArgs) {}

    private NativePlan nativePlan(IntUnaryOperator indexOfSlot) {
        java.util.ArrayList<RecordedProbeHits.Read> reads = new java.util.ArrayList<>();
        int[] line = new int[3 * args.length];
        boolean printable = true;
        for (int i = 0; i < programs.length; i++) {
            if (reads.size() > RecordedProbeHits.MAX_READS) return null;     // more than a record holds (checked per argument: a read's base stays small)
            Insn[] c = programs[i].code;
            FetchArg a = args[i];
            boolean any = false;
            // $comm and an immediate string store what the record holds (the comm word) or nothing read
            if (c[0].op != COMM && c[0].op != DATA) for (Insn x : c) any |= FetchProgram.readsMemory(x.op);
            int kind = switch (a.type()) {
                case X8, X16, X32, X64 -> 0;
                case U8, U16, U32, U64 -> 1;
                case S8, S16, S32, S64 -> 2;
                default -> -1;
            };
            if (!any) {
                // a register's value as a number, or something only the Java side prints
                boolean raw = c.length == 3 && (c[0].op == REG || c[0].op == RETVAL) && c[1].op == ST_RAW && c[2].op == END
                        && kind >= 0 && a.arrayLength() == 0 && a.bitfield() == null && c[1].size == a.type().size();
                int index = raw ? indexOfSlot.applyAsInt(c[0].op == RETVAL ? regs.returnValueSlot() : c[0].param) : -1;
                if (index < 0 || index >= LINE_READ) printable = false;
                else set(line, i, index, kind, a.type().size());
                continue;
            }
            if (a.arrayLength() != 0) return null;
            int slot = switch (c[0].op) {
                case REG -> c[0].param;
                case ARG -> c[0].param < regs.registerArguments() ? regs.argumentSlot(c[0].param) : -1;
                default -> -1;
            };
            int index = slot < 0 ? -1 : indexOfSlot.applyAsInt(slot);
            if (index < 0 || index > 255) return null;
            int base = index, pc = 1;
            boolean fromRead = false;
            for (; c[pc].op == DEREF || c[pc].op == UDEREF; pc++) {
                reads.add(new RecordedProbeHits.Read(fromRead, base, c[pc].offset, 8, false, c[pc].op == UDEREF));
                fromRead = true;
                base = reads.size() - 1;
            }
            Insn st = c[pc++];
            if (st.op == ST_MEM || st.op == ST_UMEM) {
                if (st.size != 1 && st.size != 2 && st.size != 4 && st.size != 8) return null;
                reads.add(new RecordedProbeHits.Read(fromRead, base, st.offset, st.size, false, st.op == ST_UMEM));
            } else if (st.op == ST_STRING || st.op == ST_USTRING) {
                if (c[pc].op != END) return null;
                reads.add(new RecordedProbeHits.Read(fromRead, base, st.offset, 0, true, st.op == ST_USTRING));
                // its bytes in double quotes, as formatValue prints them (an empty one stays the Java side's: a fault on some kernels)
                if (a.type() != FetchType.STRING && a.type() != FetchType.USTRING || reads.size() - 1 + LINE_READ > 255) printable = false;
                else set(line, i, LINE_READ + reads.size() - 1, LINE_STRING, 0);
                continue;
            } else if (st.op != ST_RAW) {
                return null;
            }
            boolean bitfield = c[pc].op == MOD_BF;
            if (bitfield) pc++;
            if (c[pc].op != END) return null;
            // the value stored: the read ST_MEM or ST_UMEM made, or for ST_RAW the last dereference's (the register's without one)
            int source = st.op != ST_RAW ? LINE_READ + reads.size() - 1 : fromRead ? LINE_READ + base : index;
            if (bitfield || kind < 0 || a.bitfield() != null || st.size != a.type().size() || source > 255) printable = false;
            else set(line, i, source, kind, st.size);
        }
        if (reads.size() > RecordedProbeHits.MAX_READS) return null;
        return new NativePlan(reads.toArray(new RecordedProbeHits.Read[0]), printable ? line : null);
    }

    private static void set(int[] line, int i, int source, int kind, int size) {
        line[3 * i] = source;
        line[3 * i + 1] = kind;
        line[3 * i + 2] = size;
    }

    /** Bytes of the fixed header after the common fields: 8 ({@code __probe_ip}) or 16 (func, ret_ip). */
    public int probeHeaderSize() { return definition.isReturn() ? 16 : 8; }

    /** The fixed size of the argument area ({@code tp->size}). */
    public int fixedSize() { return fixedSize; }

    /** Offset of argument {@code i} inside the argument area. */
    public int argOffset(int i) { return offsets[i]; }

    /**
     * {@code tp->entry_arg}: the parameters (from 0) a return probe saves at function entry, in
     * the order of their 8-byte slots in the entry data; empty when it reads none.
     */
    public int[] entryArgs() {
        int n = 0;
        for (FetchProgram p : programs) for (Insn i : p.code) if (i.op == EDATA) n = Math.max(n, (int) (i.offset / 8) + 1);
        int[] slots = new int[n];
        for (FetchProgram p : programs) for (Insn i : p.code) if (i.op == EDATA) slots[(int) (i.offset / 8)] = i.param;
        return slots;
    }

    /** {@code store_trace_entry_data}: saves {@link #entryArgs()} from the entry registers into {@code data}. */
    public void storeEntryArgs(FetchContext ctx, byte[] data) {
        int[] slots = entryArgs();
        FetchBuffer b = new FetchBuffer();
        for (int k = 0; k < slots.length && 8 * k + 8 <= data.length; k++) LONG.set(data, 8 * k, argument(ctx, slots[k], b));
    }

    /** A reusable scratch area for {@link #fetch(FetchContext, FetchBuffer)}. */
    public static final class FetchBuffer {
        byte[] data = new byte[256];
        int end;
        final byte[] word = new byte[8];
        /** A return probe's entry data ({@code ri->data}: the parameters saved at entry), or null. */
        byte[] entryData;

        /** Sets the entry data the next fetch of a return probe reads its {@code $argN} from. */
        public FetchBuffer entryData(byte[] d) { this.entryData = d; return this; }

        void ensure(int n) {
            if (n > data.length) data = java.util.Arrays.copyOf(data, Math.max(n, data.length * 2));
        }

        /** The bytes produced by the last fetch. */
        public byte[] bytes() { return java.util.Arrays.copyOf(data, end); }

        /** Length of the last fetch. */
        public int length() { return end; }
    }

    /**
     * Runs every argument's plan. Returns the argument area, or null when the whole entry would
     * exceed {@link #MAX_EVENT_SIZE} (the kernel's ring buffer refuses it and the event is lost).
     */
    public byte[] fetch(FetchContext ctx) {
        FetchBuffer b = new FetchBuffer();
        return fetch(ctx, b) ? b.bytes() : null;
    }

    /** Allocation-free variant: fills {@code b}; false when the entry is too large. */
    public boolean fetch(FetchContext ctx, FetchBuffer b) {
        // __get_data_size: what each dynamic argument would store, measured first
        int dsize = 0;
        for (FetchProgram p : programs) {
            if (!p.dynamic) continue;
            b.ensure(fixedSize);
            b.end = fixedSize;
            int len = run(p, ctx, b, 0, true, MAX_STRING_SIZE * 64);
            if (len > 0) dsize += len;
        }
        b.ensure(fixedSize + dsize + 1);
        java.util.Arrays.fill(b.data, 0, fixedSize + dsize + 1, (byte) 0);
        // store_trace_args
        int dyndata = fixedSize, maxlen = dsize;
        for (int i = 0; i < programs.length; i++) {
            FetchProgram p = programs[i];
            if (p.dynamic) INT.set(b.data, offsets[i], (maxlen << 16) | (dyndata & 0xffff));
            b.end = dyndata;
            int ret = run(p, ctx, b, offsets[i], false, maxlen);
            if (p.dynamic && ret > 0) {
                dyndata += ret;
                maxlen -= ret;
            }
        }
        b.end = fixedSize + dsize;
        return COMMON_SIZE + probeHeaderSize() + b.end <= MAX_EVENT_SIZE;
    }

    private long stackNth(FetchContext ctx, int n, FetchBuffer b) {
        long sp = ctx.stackPointer();
        long addr = sp + 8L * n;
        if (user) {                     // get_user_stack_nth: a user read, no kernel stack bound
            if (!ctx.readUser(addr, b.word, 0, 8)) return 0;
            return (long) LONG.get(b.word, 0);
        }
        long mask = ~((long) RegisterSet.THREAD_SIZE - 1);
        if ((addr & mask) != (sp & mask)) return 0;
        if (!ctx.readKernel(addr, b.word, 0, 8)) return 0;
        return (long) LONG.get(b.word, 0);
    }

    private long argument(FetchContext ctx, int n, FetchBuffer b) {
        if (n < regs.registerArguments()) return ctx.register(regs.argumentSlot(n));
        if (regs.stackArguments()) return stackNth(ctx, n - (regs.registerArguments() - 1), b);
        return 0;
    }

    /**
     * {@code process_fetch_insn} + {@code process_fetch_insn_bottom}; negative on a fault. Dynamic
     * data goes to {@code b.end} onwards, at most {@code maxlen} bytes; with {@code measure} only
     * the size a dynamic argument needs is returned ({@code dest} is scratch).
     */
    private int run(FetchProgram p, FetchContext ctx, FetchBuffer b, int dest, boolean measure, int maxlen) {
        Insn[] code = p.code;
        int pc = 0;
        long val;
        Insn c = code[0];
        switch (c.op) {
            case REG -> val = ctx.register(c.param);
            case STACK -> val = stackNth(ctx, c.param, b);
            case STACKP -> val = ctx.stackPointer();
            case RETVAL -> val = ctx.register(regs.returnValueSlot());
            case ARG -> val = argument(ctx, c.param, b);
            case EDATA -> val = b.entryData != null && c.offset + 8 <= b.entryData.length ? (long) LONG.get(b.entryData, (int) c.offset) : 0;
            case IMM -> val = c.imm;
            case BADDR -> val = ctx.watchAddress();
            case FOFFS -> val = ctx.fileOffsetBase() + c.imm;     // translate_user_vaddr: bp_addr - probe offset + OFFS
            case NOP_SYMBOL -> { pc++; val = code[1].imm; }
            case COMM -> { return storeBytes(ctx.comm(), b, b.end, dest, maxlen); }
            case DATA -> { return storeBytes(c.bytes, b, b.end, dest, maxlen); }
            default -> { return -1; }
        }
        pc++;
        long lval = val;
        int i = 0, total = 0, ret = 0, at = b.end;
        stage2:
        while (true) {
            while (code[pc].op == DEREF || code[pc].op == UDEREF) {
                lval = val;
                long a = val + code[pc].offset;
                boolean ok = code[pc].op == DEREF ? ctx.readProbeMemory(a, b.word, 0, 8) : ctx.readUser(a, b.word, 0, 8);
                if (!ok) return -14;
                val = (long) LONG.get(b.word, 0);
                pc++;
            }
            int s3 = pc;
            while (true) {
                Insn st = code[pc];
                switch (st.op) {
                    case ST_RAW -> storeRaw(b.data, dest, st.size, val);
                    case ST_MEM -> ctx.readProbeMemory(val + st.offset, b.data, dest, st.size);
                    case ST_UMEM -> ctx.readUser(val + st.offset, b.data, dest, st.size);
                    case ST_STRING -> ret = storeString(ctx, val + st.offset, false, b, at, dest, maxlen - (at - b.end));
                    case ST_USTRING -> ret = storeString(ctx, val + st.offset, true, b, at, dest, maxlen - (at - b.end));
                    case ST_SYMSTR -> ret = storeSymstr(ctx.symbols().sprintSymbol(val + st.offset)
                            .getBytes(StandardCharsets.UTF_8), b, at, measure, maxlen - (at - b.end));
                    default -> { return -84; }
                }
                pc++;
                if (code[pc].op == MOD_BF) {
                    b.ensure(dest + code[pc].basesize);
                    applyBitfield(b.data, dest, code[pc]);
                    pc++;
                }
                if (code[pc].op == LP_ARRAY) {
                    // an element that faults adds nothing (recorded: 6.1 prints {"sleep","1",(fault)},
                    // the stable fix "tracing/probes: Fix not to count error code to total length")
                    total += Math.max(ret, 0);
                    at += Math.max(ret, 0);
                    if (++i < code[pc].param) {
                        pc = s3;
                        if (code[s3].op != ST_STRING && code[s3].op != ST_USTRING) {
                            dest += code[s3].size;
                            val += code[s3].size;
                            continue;
                        }
                        pc--;
                        val = lval + 8;
                        dest += 4;
                        INT.set(b.data, dest, ((maxlen - (at - b.end)) << 16) | (at & 0xffff));
                        continue stage2;
                    }
                    pc++;
                    ret = total;
                }
                return code[pc].op == END ? ret : -84;
            }
        }
    }

    private static void storeRaw(byte[] d, int off, int size, long v) {
        switch (size) {
            case 1 -> d[off] = (byte) v;
            case 2 -> SHORT.set(d, off, (short) v);
            case 4 -> INT.set(d, off, (int) v);
            default -> LONG.set(d, off, v);
        }
    }

    private static long loadRaw(byte[] d, int off, int size) {
        return switch (size) {
            case 1 -> d[off] & 0xffL;
            case 2 -> (short) SHORT.get(d, off) & 0xffffL;
            case 4 -> (int) INT.get(d, off) & 0xffff_ffffL;
            default -> (long) LONG.get(d, off);
        };
    }

    private static void applyBitfield(byte[] d, int off, Insn bf) {
        int bits = bf.basesize * 8;
        long mask = bits == 64 ? -1L : (1L << bits) - 1;
        long v = loadRaw(d, off, bf.basesize);
        v = (bf.lshift >= 64 ? 0 : v << bf.lshift) & mask;
        v = bf.rshift >= 64 ? 0 : v >>> bf.rshift;
        storeRaw(d, off, bf.basesize, v);
    }

    /** {@code fetch_store_string}: the string and its NUL at {@code at}; length 0 on a fault. */
    private static int storeString(FetchContext ctx, long addr, boolean user, FetchBuffer b, int at, int dest, int maxlen) {
        int max = Math.min(maxlen, MAX_STRING_SIZE);
        if (max <= 0) return -12;
        b.ensure(at + max);
        int n = user ? ctx.readUserString(addr, b.data, at, max) : ctx.readProbeString(addr, b.data, at, max);
        if (n < 0) {
            INT.set(b.data, dest, at & 0xffff);
            return -14;
        }
        INT.set(b.data, dest, (n << 16) | (at & 0xffff));
        return n;
    }

    /** {@code $comm} and immediate strings: {@code fetch_store_string} of bytes that cannot fault. */
    private static int storeBytes(byte[] s, FetchBuffer b, int at, int dest, int maxlen) {
        int len = 0;
        while (len < s.length && s[len] != 0) len++;
        len = Math.min(len, Math.min(maxlen, MAX_STRING_SIZE) - 1);
        if (len < 0) return -12;
        b.ensure(at + len + 1);
        System.arraycopy(s, 0, b.data, at, len);
        b.data[at + len] = 0;
        INT.set(b.data, dest, ((len + 1) << 16) | (at & 0xffff));
        return len + 1;
    }

    /**
     * {@code symstr} as Debian's 6.1 stores it: the symbol and its NUL at {@code at}, the
     * {@code __data_loc} word left as preset, and the symbol's length without the NUL returned
     * (its size when measuring counts the NUL).
     */
    private static int storeSymstr(byte[] s, FetchBuffer b, int at, boolean measure, int maxlen) {
        int len = s.length;
        if (measure) return len + 1;
        if (maxlen <= 0) return -12;
        b.ensure(at + len + 1);
        System.arraycopy(s, 0, b.data, at, len);
        b.data[at + len] = 0;
        return len;
    }

    static long readField(byte[] d, int off, int size) { return loadRaw(d, off, size); }
}
