package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * {@link RecordedProbeHits} of one vCPU: the state of {@code kpemu_probe_hits.h}, which the
 * vCPU's native interrupt hook consults at every breakpoint ({@code kpemu_x86_probe_hits.c} at
 * an {@code int3}, {@code kpemu_arm64_probe_hits.c} at a BRK). Sites are laid out here in the C
 * code's open-addressing table (the same hash), records are read from its ring.
 */
public final class NativeProbeHits implements RecordedProbeHits {
    private static final long SIZE = 11752;
    // struct kpemu_probe_hits's fields
    private static final long ENABLED = 0, BUSY = 4, SITE_MASK = 8, RECORD_SIZE = 12, SITE_KEYS = 16, SITE_RESUME = 24, RING = 32,
            CAPACITY = 40, COUNT = 44, EXECUTED = 48, NREGS = 56, NWORDS = 60, BASE_INDEX = 64, MODE_INDEX = 68, REGS = 72,
            WORD_BASE = 232, WORD_OFFSET = 264, WORD_SIZE = 328, RECORDED = 360, PC_CTX = 368, PC_OFFSET = 376,
            LINES_ON = 384, LINE_CAPACITY = 388, LINE_BUF = 392, LINE_USED = 400, LINE_META = 408, SITE_FORMAT = 416, FORMATS = 424,
            LIVE = 432, CONTEXTS = 448, CONTEXT_SIZE = 216, LINES_FORMATTED = 7360,
            NREADS = 7368, SITE_READS = 7376, READ_PLANS = 7384, STRING_AREA = 7392, REG_CTX_OFFSET = 7400, REGS_FROM_CTX = 7560,
            TRAMPOLINE = 7568, KRET_FREE = 7576, SWAP_READ = 7584, KRET_COUNT = 7596,
            KRET_TABLE = 7600, KRET_RETURNS = 7608, RET_FRAME_INDEX = 7616, ENTRY_FRAME_INDEX = 7620, RET_FRAME_OFFSET = 7624,
            RETURNS_RECORDED = 7640, RET_FORMAT = 7648, HEADS = 7656, HEAD_SIZE = 256, HEAD_RET = 0, HEAD_COUNTER = 8, HEAD_LEN = 12,
            HEAD_BYTES = 16, HEAD_MAX = 240;
    // struct kpemu_line_context's fields
    private static final long CTX_VALID = 0, CTX_CLS = 4, CTX_IRQS_OFF = 8, CTX_OK = 12, CTX_WORDS = 16, CTX_LEN = 144, CTX_TASK_COLUMNS = 148, CTX_COLUMNS = 152;
    /** Contexts the C code keeps, and the most bytes of columns each holds. */
    static final int LINE_CONTEXTS = 32, LINE_COLUMNS_MAX = 64;
    /** Bytes of lines the ring's records may take (a record whose line does not fit gets none). */
    static final int LINE_BYTES = 1 << 19;
    /** Records the ring holds: the host drains it at every upcall and slice end, so it rarely fills (a full ring sends hits to Java). */
    static final int CAPACITY_RECORDS = 4096;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private MemorySegment ring = MemorySegment.NULL, keys, resume;
    private int[] siteOfSlot = new int[0];
    private int recordSize, nregs, nwords, nreads, stringBytes;
    /** The sites' read plans ({@link #siteReads}) and each slot's plan offset. */
    private MemorySegment readPlans, siteReadsOfSlot;
    private int[] wordSize = new int[0];
    private final RecordView view = new RecordView();
    /** The formats of the sites' lines (null: none), the site index of each slot's, the line buffer and its records' places. */
    private MemorySegment formats, siteFormat, lineBuf, lineMeta;
    /** Bumped whenever a ring's known contexts are forgotten ({@link #lineFormats}), over every ring. */
    private static final java.util.concurrent.atomic.AtomicLong GENERATIONS = new java.util.concurrent.atomic.AtomicLong();
    private long generation;
    /** A drain's lines and their places, copied in two bulk copies. */
    private byte[] lines = new byte[0];
    private MemorySegment linesSegment = MemorySegment.ofArray(lines);
    private long[] lineMetaCopy = new long[0];
    private MemorySegment lineMetaSegment = MemorySegment.ofArray(lineMetaCopy);
    private boolean linesCopied;

    /** The engine registers a vCPU's records need: one that tells kernel from user mode, and the base register's (-1: none). */
    private final int modeRegister, baseRegister;
    /** Where registers lie in the saved PC context, and how much of it a save holds. */
    private final java.util.function.IntToLongFunction contextOffset;
    private final long contextEnd;

    /**
     * True when kpemu's native library has {@code recorder} (e.g. {@code kpemu_x86_record_hit})
     * and {@code -Dkpemu.recordedHits=false} (or the x86 one's older
     * {@code -Dkpemu.x86.recordedHits=false}) does not turn it off: every hit through the Java
     * path, for comparisons.
     */
    public static boolean available(String recorder) {
        if ("false".equals(System.getProperty("kpemu.recordedHits"))) return false;
        if (recorder.startsWith("kpemu_x86") && "false".equals(System.getProperty("kpemu.x86.recordedHits"))) return false;
        return NativeHookFunctions.find(recorder, SIZE) != null;
    }

    /**
     * @param executed the instruction clock's count of executed instructions (8 bytes)
     * @param pcContext a context of the CPU state's prefix holding the PC at {@code pcOffset} (the machine's setPc's)
     * @param modeRegister the engine register that tells kernel from user mode at a hit (x86-64 CS, arm64 PSTATE): captured always
     * @param baseRegister the engine register {@link Base#GS_BASE} words add to (x86-64 GS_BASE), or -1: none
     * @param contextOffset where an engine register's value lies in {@code pcContext} once saved
     *        ({@link ContextRegisters}), -1 for one read through the engine; only offsets within
     *        the first {@code contextEnd} bytes (what the context saves) are used
     */
    public NativeProbeHits(MemorySegment executed, MemorySegment pcContext, long pcOffset, int modeRegister, int baseRegister,
            java.util.function.IntToLongFunction contextOffset, long contextEnd) {
        this.modeRegister = modeRegister;
        this.baseRegister = baseRegister;
        this.contextOffset = contextOffset;
        this.contextEnd = contextEnd;
        state = arena.allocate(SIZE, 8);
        state.set(ADDRESS, EXECUTED, executed);
        state.set(ADDRESS, PC_CTX, pcContext);
        state.set(JAVA_LONG, PC_OFFSET, pcOffset);
        sites(new long[0], new long[0]);
    }

    /** kpemu_probe_hits.h's read kinds of a kretprobe's entry. */
    private static final int READ_RETURN = 4, READ_RETURN_REGISTER = 5, READ_RETURN_SEEN = 16;

    /**
     * The trampoline and the counters of free kretprobe instances ({@link #returnInstances}), which
     * {@link PerCpuProbeHits} keeps and changes for every vCPU's ring at once.
     */
    void returnCounts(long trampoline, MemorySegment counts, int n) {
        if (closed) return;
        if (pending()) throw new IllegalStateException("records wait");
        state.set(JAVA_LONG, TRAMPOLINE, trampoline);
        state.set(ADDRESS, KRET_FREE, counts);
        state.set(JAVA_INT, KRET_COUNT, n);
        state.set(JAVA_INT, SWAP_READ, -1);
    }

    /**
     * The outstanding instances' table and the counters whose returns are recorded
     * ({@link #returnsRecorded}), which {@link PerCpuProbeHits} keeps for every vCPU's ring at
     * once; {@code table} NULL: no kretprobe entry or return is recorded.
     */
    void returnTable(MemorySegment table, MemorySegment returns, int returnFrame, long returnFrameOffset, int entryFrame) {
        if (closed) return;
        if (pending()) throw new IllegalStateException("records wait");
        state.set(ADDRESS, KRET_TABLE, table);
        state.set(ADDRESS, KRET_RETURNS, returns);
        state.set(JAVA_INT, RET_FRAME_INDEX, returnFrame);
        state.set(JAVA_LONG, RET_FRAME_OFFSET, returnFrameOffset);
        state.set(JAVA_INT, ENTRY_FRAME_INDEX, entryFrame);
    }

    @Override public long returnsRecorded() { return closed ? returnsAtClose : state.get(JAVA_LONG, RETURNS_RECORDED); }

    /** The C state, for the vCPU's native hook to point at. */
    public MemorySegment state() { return state; }

    @Override
    public void capture(int[] ids, Word[] words) {
        if (closed) return;
        if (pending()) throw new IllegalStateException("records wait");
        if (ids.length > MAX_REGISTERS || words.length > MAX_WORDS) throw new IllegalArgumentException("too many registers or words");
        int base = baseRegister < 0 ? -1 : indexOf(ids, baseRegister), mode = indexOf(ids, modeRegister);
        if (mode < 0 || (baseRegister >= 0 && base < 0)) throw new IllegalArgumentException("the mode and base registers must be captured");
        boolean fromContext = false;
        for (int i = 0; i < ids.length; i++) {
            state.set(JAVA_INT, REGS + 4L * i, ids[i]);
            long off = contextOffset.applyAsLong(ids[i]);
            boolean saved = off >= 0 && off + 8 <= contextEnd;
            state.set(JAVA_INT, REG_CTX_OFFSET + 4L * i, saved ? (int) off : -1);
            fromContext |= saved;
        }
        state.set(JAVA_INT, REGS_FROM_CTX, fromContext ? 1 : 0);
        for (int k = 0; k < words.length; k++) {
            if (k > 0 && words[k].base() == Base.TASK && words[0].size() != 8) throw new IllegalArgumentException("word 0 is the task pointer");
            if (words[k].base() == Base.REGISTER && (words[k].offset() < 0 || words[k].offset() >= ids.length || words[k].size() != 8)) {
                throw new IllegalArgumentException("a register word names a captured register, 8 bytes");
            }
            if (words[k].base() == Base.GS_BASE && baseRegister < 0) throw new IllegalArgumentException("no base register on this vCPU");
            state.set(JAVA_INT, WORD_BASE + 4L * k, words[k].base().ordinal());
            state.set(JAVA_LONG, WORD_OFFSET + 8L * k, words[k].offset());
            state.set(JAVA_INT, WORD_SIZE + 4L * k, words[k].size());
        }
        nregs = ids.length;
        nwords = words.length;
        wordSize = new int[words.length];
        for (int k = 0; k < words.length; k++) wordSize[k] = words[k].size();
        state.set(JAVA_INT, NREGS, nregs);
        state.set(JAVA_INT, NWORDS, nwords);
        state.set(JAVA_INT, BASE_INDEX, base);
        state.set(JAVA_INT, MODE_INDEX, mode);
        layRing();
    }

    /** The ring for records of the registers, words and read slots set now. */
    private void layRing() {
        recordSize = 16 + 8 * nregs + 16 * nwords + 16 * nreads + stringBytes;
        state.set(JAVA_INT, NREADS, nreads);
        state.set(JAVA_INT, STRING_AREA, stringBytes);
        state.set(JAVA_INT, RECORD_SIZE, recordSize);
        ring = arena.allocate((long) recordSize * CAPACITY_RECORDS, 8);
        state.set(ADDRESS, RING, ring);
        state.set(JAVA_INT, CAPACITY, CAPACITY_RECORDS);
        state.set(JAVA_INT, COUNT, 0);
    }

    /**
     * The sites' read plans ({@code kpemu_probe_hits.h} kpemu_hits_site_reads): {@code readsOfSite[i]}
     * the reads of site i (null or empty: none), as {@link #sites} numbered them. Replaced by the
     * next {@link #sites}. The ring is laid out again when the most reads a site makes changes.
     */
    @Override
    public void siteReads(Read[][] readsOfSite) {
        if (closed) return;
        if (pending()) throw new IllegalStateException("records wait");
        state.set(ADDRESS, SITE_READS, MemorySegment.NULL);
        int most = 0;
        boolean strings = false;
        if (readsOfSite != null) {
            if (readsOfSite.length != siteAddresses.length) throw new IllegalArgumentException("one plan a site");
            for (Read[] r : readsOfSite) {
                if (r == null) continue;
                most = Math.max(most, r.length);
                for (Read x : r) strings |= x.string();
            }
        }
        if (most > MAX_READS) throw new IllegalArgumentException("more than " + MAX_READS + " reads at a site");
        int area = strings ? STRING_BYTES : 0;
        if ((most != nreads || area != stringBytes) && nregs > 0) {
            nreads = most;
            stringBytes = area;
            layRing();
        }
        if (most == 0 || nregs == 0) return;     // no reads, or nothing captured yet: no site is recorded
        java.io.ByteArrayOutputStream blob = new java.io.ByteArrayOutputStream();
        int[] at = new int[readsOfSite.length];
        for (int i = 0; i < readsOfSite.length; i++) {
            Read[] r = readsOfSite[i];
            at[i] = -1;
            if (r == null || r.length == 0) continue;
            at[i] = blob.size();
            blob.write(r.length);
            for (int j = 0; j < r.length; j++) {
                Read x = r[j];
                if (x.fromRead() ? x.base() >= j : x.base() >= nregs) throw new IllegalArgumentException("a read's base is no register or earlier read");
                blob.write(x.fromRead() ? 1 : 0);
                blob.write(x.base());
                blob.write(x.size());
                ReturnEntry e = x.returnEntry();
                if (e != null && j != r.length - 1) throw new IllegalArgumentException("a kretprobe's entry is a plan's last read");
                blob.write(e != null ? (e.inRegister() ? READ_RETURN_REGISTER : READ_RETURN) | (e.seenAfter() ? READ_RETURN_SEEN : 0)
                        : (x.string() ? 1 : 0) | (x.user() ? 2 : 0));
                long offset = e != null ? (long) e.counter() << 32 | (x.offset() & 0xffff_ffffL) : x.offset();
                for (int b = 0; b < 8; b++) blob.write((int) (offset >>> (8 * b)));
            }
        }
        byte[] bytes = blob.toByteArray();
        if (readPlans == null || readPlans.byteSize() < bytes.length) readPlans = arena.allocate(Math.max(256, bytes.length), 8);
        MemorySegment.copy(MemorySegment.ofArray(bytes), 0, readPlans, 0, bytes.length);
        int slots = siteOfSlot.length;
        if (siteReadsOfSlot == null || siteReadsOfSlot.byteSize() < 4L * slots) siteReadsOfSlot = arena.allocate(4L * Math.max(16, slots), 4);
        for (int i = 0; i < slots; i++) {
            long key = keys.get(JAVA_LONG, 8L * i);
            siteReadsOfSlot.set(JAVA_INT, 4L * i, key == 0 ? -1 : at[siteOfSlot[i]]);
        }
        state.set(ADDRESS, READ_PLANS, readPlans);
        state.set(ADDRESS, SITE_READS, siteReadsOfSlot);
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
        siteAddresses = addresses.clone();
        state.set(ADDRESS, SITE_READS, MemorySegment.NULL);
        lineFormats(null, null, null);
    }

    private long[] siteAddresses = new long[0];

    /**
     * The line formats of the sites ({@code kpemu_probe_hits.h} kpemu_hits_format): {@code blob}
     * holds them, {@code formatOfSite[i]} is site i's offset in it (-1: no line); null: no line
     * at all. The known contexts are forgotten. Replaced by the next {@link #sites}.
     */
    @Override
    public void lineFormats(byte[] blob, int[] formatOfSite, int[] formatOfCounter) {
        if (closed) return;
        state.set(JAVA_INT, LINES_ON, 0);
        state.set(ADDRESS, RET_FORMAT, MemorySegment.NULL);
        for (int i = 0; i < LINE_CONTEXTS; i++) state.set(JAVA_INT, CONTEXTS + CONTEXT_SIZE * i + CTX_VALID, 0);
        for (int i = 0; i < RETURN_HEADS; i++) state.set(JAVA_INT, HEADS + HEAD_SIZE * i + HEAD_COUNTER, -1);
        generation = GENERATIONS.incrementAndGet();
        if (blob == null || formatOfSite == null || liveTime == null || nregs == 0) return;
        if (formatOfSite.length != siteAddresses.length) throw new IllegalArgumentException("one format offset a site");
        int slots = siteOfSlot.length;
        if (siteFormat == null || siteFormat.byteSize() < 4L * slots) siteFormat = arena.allocate(4L * Math.max(16, slots), 4);
        boolean any = false;
        for (int i = 0; i < slots; i++) {
            long key = keys.get(JAVA_LONG, 8L * i);
            int f = key == 0 ? -1 : formatOfSite[siteOfSlot[i]];
            if (f >= blob.length) throw new IllegalArgumentException("a format past the blob");
            siteFormat.set(JAVA_INT, 4L * i, f);
            any |= f >= 0;
        }
        if (formatOfCounter != null) {
            int n = formatOfCounter.length;
            if (counterFormat == null || counterFormat.byteSize() < 4L * n) counterFormat = arena.allocate(4L * Math.max(16, n), 4);
            for (int i = 0; i < n; i++) {
                if (formatOfCounter[i] >= blob.length) throw new IllegalArgumentException("a format past the blob");
                counterFormat.set(JAVA_INT, 4L * i, formatOfCounter[i]);
                any |= formatOfCounter[i] >= 0;
            }
            if (n > 0) state.set(ADDRESS, RET_FORMAT, counterFormat);
        }
        if (!any) return;
        if (formats == null || formats.byteSize() < blob.length) formats = arena.allocate(Math.max(256, blob.length), 8);
        MemorySegment.copy(MemorySegment.ofArray(blob), 0, formats, 0, blob.length);
        if (lineBuf == null) {
            lineBuf = arena.allocate(LINE_BYTES, 8);
            lineMeta = arena.allocate(16L * CAPACITY_RECORDS, 8);
        }
        state.set(ADDRESS, FORMATS, formats);
        state.set(ADDRESS, SITE_FORMAT, siteFormat);
        state.set(ADDRESS, LINE_BUF, lineBuf);
        state.set(JAVA_INT, LINE_CAPACITY, LINE_BYTES);
        state.set(ADDRESS, LINE_META, lineMeta);
        state.set(ADDRESS, LIVE, liveTime);
        state.set(JAVA_INT, LINES_ON, 1);
    }

    /**
     * A context whose columns the host has formatted, kept in the C code's {@code slot}: a record
     * whose words and read flags are {@code key} ({@link Record#copyWords}), with interrupts
     * {@code irqsOff}, of a format of class {@code cls} gets {@code columns} (longer than the C
     * code keeps: the slot is emptied); with {@code taskColumns}, after the task's columns the C
     * code writes ({@link RecordedProbeHits#lineContext}).
     */
    @Override
    public void lineContext(int slot, long[] key, boolean irqsOff, int cls, byte[] columns, boolean taskColumns) {
        if (closed || state.get(JAVA_INT, LINES_ON) == 0 || slot < 0 || slot >= LINE_CONTEXTS) return;
        long e = CONTEXTS + CONTEXT_SIZE * (long) slot;
        state.set(JAVA_INT, e + CTX_VALID, 0);
        if (columns.length > LINE_COLUMNS_MAX || key.length != 2 * nwords + 1 || (taskColumns && nwords < TASK_WORDS)) return;
        state.set(JAVA_INT, e + CTX_TASK_COLUMNS, taskColumns ? 1 : 0);
        state.set(JAVA_INT, e + CTX_CLS, cls);
        state.set(JAVA_INT, e + CTX_IRQS_OFF, irqsOff ? 1 : 0);
        state.set(JAVA_INT, e + CTX_OK, (int) key[2 * nwords]);
        for (int i = 0; i < 2 * nwords; i++) state.set(JAVA_LONG, e + CTX_WORDS + 8L * i, key[i]);
        state.set(JAVA_INT, e + CTX_LEN, columns.length);
        MemorySegment.copy(MemorySegment.ofArray(columns), 0, state, e + CTX_COLUMNS, columns.length);
        state.set(JAVA_INT, e + CTX_VALID, 1);
    }

    /** Each counter's return format's offset ({@link #lineFormats}). */
    private MemorySegment counterFormat;

    @Override
    public void returnHead(int slot, int counter, long returnAddress, byte[] head) {
        if (closed || slot < 0 || slot >= RETURN_HEADS) return;
        long e = HEADS + HEAD_SIZE * (long) slot;
        state.set(JAVA_INT, e + HEAD_COUNTER, -1);
        if (head.length > HEAD_MAX || counter < 0) return;
        state.set(JAVA_LONG, e + HEAD_RET, returnAddress);
        state.set(JAVA_INT, e + HEAD_LEN, head.length);
        MemorySegment.copy(MemorySegment.ofArray(head), 0, state, e + HEAD_BYTES, head.length);
        state.set(JAVA_INT, e + HEAD_COUNTER, counter);
    }

    @Override public long lineGeneration() { return generation; }

    /** Lines the C code has formatted so far. */
    @Override
    public long linesFormatted() { return closed ? linesAtClose : state.get(JAVA_LONG, LINES_FORMATTED); }

    /** The vCPU clock's live-time fields (instr_offset, idle_nanos, nanos_per_instr), or null: no line is formatted natively. */
    private MemorySegment liveTime;

    /** Where the C code reads the live guest time ({@link InstructionClock}'s fields); null: lines are never formatted here. */
    void liveTime(MemorySegment fields) { this.liveTime = fields; }

    /** The C code's home slot (kpemu_probe_hits.h kpemu_hits_slot_of). */
    private static int slot(long address, int mask) {
        long h = address * 0x9E37_79B9_7F4A_7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }

    @Override
    public void setEnabled(boolean on) {
        if (closed) return;
        state.set(JAVA_INT, ENABLED, on && nregs > 0 ? 1 : 0);
    }

    @Override public void setBusy(boolean busy) { if (!closed) state.set(JAVA_INT, BUSY, busy ? 1 : 0); }

    @Override public long recorded() { return closed ? recordedAtClose : state.get(JAVA_LONG, RECORDED); }

    @Override public boolean pending() { return !closed && state.get(JAVA_INT, COUNT) != 0; }

    /** The records of a drain, copied from the ring in one bulk copy (reads of a native segment are calls each under the client compiler). */
    private long[] copied = new long[0];
    private MemorySegment copiedSegment = MemorySegment.ofArray(copied);

    @Override
    public void drainTo(Reader consumer) {
        int n = state.get(JAVA_INT, COUNT);
        try {
            int longs = n * (recordSize / 8);
            if (copied.length < longs) {
                copied = new long[Math.max(longs, copied.length * 2)];
                copiedSegment = MemorySegment.ofArray(copied);
            }
            // segment to segment: the array form finds the array's type and length by reflection at every call
            MemorySegment.copy(ring, 0, copiedSegment, 0, 8L * longs);
            linesCopied = lineBuf != null;
            if (linesCopied) {
                int used = state.get(JAVA_INT, LINE_USED);
                if (lines.length < used) {
                    lines = new byte[Math.max(used, Math.min(LINE_BYTES, 2 * lines.length + 4096))];
                    linesSegment = MemorySegment.ofArray(lines);
                }
                MemorySegment.copy(lineBuf, 0, linesSegment, 0, used);
                if (lineMetaCopy.length < 2 * n) {
                    lineMetaCopy = new long[2 * CAPACITY_RECORDS];
                    lineMetaSegment = MemorySegment.ofArray(lineMetaCopy);
                }
                MemorySegment.copy(lineMeta, 0, lineMetaSegment, 0, 16L * n);
            }
            for (int i = 0; i < n; i++) {
                view.at = i * (recordSize / 8);
                view.index = i;
                consumer.accept(view);
            }
            consumer.drained();
        } finally {
            state.set(JAVA_INT, COUNT, 0);
            if (lineBuf != null) state.set(JAVA_INT, LINE_USED, 0);
        }
    }

    /** A record of {@link #copied}: the slot and the word flags, the clock, the registers, the words (two longs each). */
    private final class RecordView implements Record {
        int at, index;
        @Override public int lineLength() { return linesCopied ? (int) (lineMetaCopy[2 * index] >>> 32) & 0x7fff_ffff : 0; }
        @Override public boolean lineWithoutColumns() { return linesCopied && lineMetaCopy[2 * index] < 0; }
        @Override public int lineOffset() { return (int) lineMetaCopy[2 * index]; }
        @Override public long lineNanos() { return lineMetaCopy[2 * index + 1]; }
        @Override public byte[] lineBytes() { return lines; }

        @Override
        public int site() {
            int slot = (int) copied[at];
            return slot < 0 ? slot : siteOfSlot[slot];     // a return's: the table slot with the sign bit (RecordedProbeHits.returnSite)
        }

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

        /** Where the record's read slots start in {@link #copied}; its string area follows them. */
        private int reads() { return at + 2 + nregs + 2 * nwords; }

        @Override public long readAddress(int j) { return copied[reads() + 2 * j]; }

        @Override public long readValue(int j) { return copied[reads() + 2 * j + 1]; }

        @Override public int stringLength(int j) { return (int) (readValue(j) >>> 32); }

        @Override
        public void stringBytes(int j, byte[] dst, int offset, int n) {
            int first = (int) readValue(j), area = reads() + 2 * nreads;
            for (int i = 0; i < n; i++) {
                int b = first + i;
                dst[offset + i] = (byte) (copied[area + (b >>> 3)] >>> (8 * (b & 7)));
            }
        }

        @Override
        public boolean wordsEqual(long[] key) {
            int n = 2 * nwords;
            if (key.length != n + 1 || key[n] != copied[at] >>> 32) return false;
            long[] c = copied;
            for (int i = 0, w = at + 2 + nregs; i < n; i++) if (c[w + i] != key[i]) return false;   // a loop: few words, no call
            return true;
        }

        @Override
        public long[] copyWords(long[] key) {
            int n = 2 * nwords;
            long[] k = key != null && key.length == n + 1 ? key : new long[n + 1];
            System.arraycopy(copied, at + 2 + nregs, k, 0, n);
            k[n] = copied[at] >>> 32;
            return k;
        }
    }

    /** Closed with the machine: what is asked afterwards (the engine's count, a change) touches no freed memory. */
    private boolean closed;
    private long recordedAtClose, linesAtClose, returnsAtClose;

    public void close() {
        if (closed) return;
        recordedAtClose = recorded();
        linesAtClose = linesFormatted();
        returnsAtClose = returnsRecorded();
        closed = true;
        if (arena.scope().isAlive()) arena.close();
    }
}
