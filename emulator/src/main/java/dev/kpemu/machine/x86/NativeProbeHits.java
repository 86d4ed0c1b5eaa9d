package dev.kpemu.machine.x86;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

import dev.kpemu.machine.NativeHookFunctions;
import dev.kpemu.machine.RecordedProbeHits;
import dev.kpemu.unicorn.X86Reg;

/**
 * {@link RecordedProbeHits} of one x86-64 vCPU: the state of {@code kpemu_x86_probe_hits.c}, which
 * {@link NativeExceptions}' interrupt hook consults at every {@code int3}. Sites are laid out here
 * in the C code's open-addressing table (the same hash), records are read from its ring.
 */
final class NativeProbeHits implements RecordedProbeHits {
    private static final long SIZE = 352;
    private static final boolean AVAILABLE = NativeHookFunctions.find("kpemu_x86_record_hit", SIZE) != null;
    // struct kpemu_x86_hits's fields
    private static final long ENABLED = 0, BUSY = 4, SITE_MASK = 8, RECORD_SIZE = 12, SITE_KEYS = 16, SITE_RESUME = 24, RING = 32,
            CAPACITY = 40, COUNT = 44, EXECUTED = 48, NREGS = 56, NWORDS = 60, GS_INDEX = 64, CS_INDEX = 68, REGS = 72,
            WORD_BASE = 200, WORD_OFFSET = 232, WORD_SIZE = 296, RECORDED = 328, PC_CTX = 336, EIP = 344;
    /** Records the ring holds: the host drains it at every upcall and slice end, so it rarely fills (a full ring sends hits to Java). */
    static final int CAPACITY_RECORDS = 4096;

    private final Arena arena = Arena.ofShared();
    final MemorySegment state;
    private MemorySegment ring = MemorySegment.NULL, keys, resume;
    private int[] siteOfSlot = new int[0];
    private int recordSize, nregs, nwords;
    private int[] wordSize = new int[0];
    private boolean retired;
    private final RecordView view = new RecordView();

    /**
     * True when kpemu's native library has the code and {@code -Dkpemu.x86.recordedHits=false}
     * does not turn it off (every hit through the Java path, for comparisons).
     */
    static boolean available() { return AVAILABLE && !"false".equals(System.getProperty("kpemu.x86.recordedHits")); }

    /**
     * @param executed the instruction clock's count of executed instructions (8 bytes)
     * @param pcContext a context of the CPU state's prefix holding RIP at {@code eipOffset} (the machine's setPc's)
     */
    NativeProbeHits(MemorySegment executed, MemorySegment pcContext, long eipOffset) {
        state = arena.allocate(SIZE, 8);
        state.set(ADDRESS, EXECUTED, executed);
        state.set(ADDRESS, PC_CTX, pcContext);
        state.set(JAVA_LONG, EIP, eipOffset);
        sites(new long[0], new long[0]);
    }

    @Override
    public void capture(int[] ids, Word[] words) {
        if (closed) return;
        if (pending()) throw new IllegalStateException("records wait");
        if (ids.length > MAX_REGISTERS || words.length > MAX_WORDS) throw new IllegalArgumentException("too many registers or words");
        int gs = indexOf(ids, X86Reg.GS_BASE), cs = indexOf(ids, X86Reg.CS);
        if (gs < 0 || cs < 0) throw new IllegalArgumentException("GS_BASE and CS must be captured");
        for (int i = 0; i < ids.length; i++) state.set(JAVA_INT, REGS + 4L * i, ids[i]);
        for (int k = 0; k < words.length; k++) {
            if (k > 0 && words[k].base() == Base.TASK && words[0].size() != 8) throw new IllegalArgumentException("word 0 is the task pointer");
            state.set(JAVA_INT, WORD_BASE + 4L * k, words[k].base().ordinal());
            state.set(JAVA_LONG, WORD_OFFSET + 8L * k, words[k].offset());
            state.set(JAVA_INT, WORD_SIZE + 4L * k, words[k].size());
        }
        nregs = ids.length;
        nwords = words.length;
        wordSize = new int[words.length];
        for (int k = 0; k < words.length; k++) wordSize[k] = words[k].size();
        recordSize = 16 + 8 * nregs + 16 * nwords;
        state.set(JAVA_INT, NREGS, nregs);
        state.set(JAVA_INT, NWORDS, nwords);
        state.set(JAVA_INT, GS_INDEX, gs);
        state.set(JAVA_INT, CS_INDEX, cs);
        state.set(JAVA_INT, RECORD_SIZE, recordSize);
        ring = arena.allocate((long) recordSize * CAPACITY_RECORDS, 8);
        state.set(ADDRESS, RING, ring);
        state.set(JAVA_INT, CAPACITY, CAPACITY_RECORDS);
        state.set(JAVA_INT, COUNT, 0);
    }

    private static int indexOf(int[] a, int v) {
        for (int i = 0; i < a.length; i++) if (a[i] == v) return i;
        return -1;
    }

    @Override
    public void sites(long[] addresses, long[] resumeAt) {
        if (closed) return;
        if (addresses.length != resumeAt.length) throw new IllegalArgumentException("one resume address a site");
        int slots = 16;
        while (slots < 2 * addresses.length) slots *= 2;
        // the C code runs only inside the engine, on the thread that calls this: it never sees a half-written table
        if (keys == null || keys.byteSize() != 8L * slots) {
            keys = arena.allocate(8L * slots, 8);
            resume = arena.allocate(8L * slots, 8);
        } else {
            keys.fill((byte) 0);
        }
        siteOfSlot = new int[slots];
        int mask = slots - 1;
        for (int s = 0; s < addresses.length; s++) {
            long a = addresses[s];
            if (a == 0) throw new IllegalArgumentException("a site at 0");
            int i = slot(a, mask);
            while (keys.get(JAVA_LONG, 8L * i) != 0 && keys.get(JAVA_LONG, 8L * i) != a) i = (i + 1) & mask;
            keys.set(JAVA_LONG, 8L * i, a);
            resume.set(JAVA_LONG, 8L * i, resumeAt[s]);
            siteOfSlot[i] = s;
        }
        state.set(ADDRESS, SITE_KEYS, keys);
        state.set(ADDRESS, SITE_RESUME, resume);
        state.set(JAVA_INT, SITE_MASK, mask);
    }

    /** The C code's home slot (kpemu_x86_probe_hits.c slot_of). */
    private static int slot(long address, int mask) {
        long h = address * 0x9E37_79B9_7F4A_7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }

    @Override
    public void setEnabled(boolean on) {
        if (closed) return;
        state.set(JAVA_INT, ENABLED, on && !retired && nregs > 0 ? 1 : 0);
    }

    /** Off for good (the machine got a second vCPU: records are one vCPU's). */
    void retire() {
        retired = true;
        setEnabled(false);
    }

    @Override public void setBusy(boolean busy) { if (!closed) state.set(JAVA_INT, BUSY, busy ? 1 : 0); }

    @Override public long recorded() { return closed ? recordedAtClose : state.get(JAVA_LONG, RECORDED); }

    @Override public boolean pending() { return !closed && state.get(JAVA_INT, COUNT) != 0; }

    /** The records of a drain, copied from the ring in one bulk copy (reads of a native segment are calls each under the client compiler). */
    private long[] copied = new long[0];

    @Override
    public void drainTo(Consumer<Record> consumer) {
        int n = state.get(JAVA_INT, COUNT);
        try {
            int longs = n * (recordSize / 8);
            if (copied.length < longs) copied = new long[Math.max(longs, copied.length * 2)];
            MemorySegment.copy(ring, JAVA_LONG, 0, copied, 0, longs);
            for (int i = 0; i < n; i++) {
                view.at = i * (recordSize / 8);
                consumer.accept(view);
            }
        } finally {
            state.set(JAVA_INT, COUNT, 0);
        }
    }

    /** A record of {@link #copied}: the slot and the word flags, the clock, the registers, the words (two longs each). */
    private final class RecordView implements Record {
        int at;

        @Override public int site() { return siteOfSlot[(int) copied[at]]; }

        @Override public long executed() { return copied[at + 1]; }

        @Override public long register(int i) { return copied[at + 2 + i]; }

        @Override public boolean wordRead(int k) { return (copied[at] >>> 32 >>> k & 1) != 0; }

        @Override public long wordValue(int k) { return copied[at + 2 + nregs + 2 * k]; }

        @Override
        public void word(int k, byte[] dst, int offset) {
            int w = at + 2 + nregs + 2 * k;
            long lo = copied[w], hi = copied[w + 1];
            int size = wordSize[k];
            for (int i = 0; i < size; i++) dst[offset + i] = (byte) ((i < 8 ? lo : hi) >>> (8 * (i & 7)));
        }
    }

    /** Closed with the machine: what is asked afterwards (the engine's count, a change) touches no freed memory. */
    private boolean closed;
    private long recordedAtClose;

    void close() {
        if (closed) return;
        recordedAtClose = recorded();
        closed = true;
        if (arena.scope().isAlive()) arena.close();
    }
}
