package dev.kpemu.kprobes;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.RecordedProbeHits;

/**
 * A probe hit recorded by the machine's native code, read back ({@link RecordedHitHandler}): the
 * registers as the hit's handler would have seen them ({@link #regs()}: read only; x86-64 an
 * ftrace site's view, arm64 the breakpoint's pt_regs), the guest time of the hit, and the words
 * the engine asked to be captured ({@link Kprobes#recordHitsWith}), read at the hit as the handler
 * would have read them then.
 * Valid only during the {@link RecordedHitHandler#onRecordedHit} call.
 */
public final class RecordedHit {
    private final Machine machine;
    private final RecordedRegs regs;
    private final RecordedProbeHits.Word[] words;
    private RecordedProbeHits.Record record;
    /** The reads of the hit's site ({@link RecordedHitHandler#memoryReads}), empty: none. */
    private RecordedProbeHits.Read[] reads = RecordedHitHandler.NO_READS;

    RecordedHit(Machine machine, LiveRegs live, String[] names, int[] ids, Regs.Entry entry, RecordedProbeHits.Word[] words) {
        this.machine = machine;
        this.regs = new RecordedRegs(live, names, ids, entry);
        this.words = words;
    }

    RecordedHit at(RecordedProbeHits.Record r, RecordedProbeHits.Read[] siteReads) {
        this.record = r;
        this.returnCounter = -1;
        this.reads = siteReads == null ? RecordedHitHandler.NO_READS : siteReads;
        regs.at(r);
        return this;
    }

    /**
     * A kretprobe return's record ({@link RecordedReturnHandler}): no site reads, the registers' ip
     * {@code realIp}; {@code counter} its kretprobe's in the native code's table, whose line format
     * the native code has when {@code formatted}.
     */
    RecordedHit atReturn(RecordedProbeHits.Record r, long realIp, int counter, boolean formatted) {
        this.record = r;
        this.reads = RecordedHitHandler.NO_READS;
        this.returnCounter = formatted ? counter : -1;
        this.returnAddress = realIp;
        regs.atReturn(r, realIp);
        return this;
    }

    private int returnCounter = -1;
    private long returnAddress;
    private int nextHead;

    /**
     * Tells the native code the head of the lines of this return's kretprobe to this return
     * address ({@link RecordedReturnHandler#returnLineFormat}): it then writes the lines of later
     * returns there itself. Nothing when this is no return or its kretprobe has no line format.
     */
    public void keepReturnHead(byte[] head) {
        RecordedProbeHits h = machine.recordedProbeHits();
        if (h == null || returnCounter < 0) return;
        h.returnHead(nextHead, returnCounter, returnAddress, head);
        nextHead = (nextHead + 1) % RecordedProbeHits.RETURN_HEADS;
    }

    /**
     * The read of guest memory (kernel, or {@code user}) the hit's site made of {@code size} bytes at {@code address}
     * ({@link RecordedHitHandler#memoryReads}), or -1: none. Every read a site plans was made (a hit
     * whose read failed is not recorded).
     */
    public int readAt(long address, int size, boolean user) {
        RecordedProbeHits.Read[] r = reads;
        for (int j = 0; j < r.length; j++) {
            if (!r[j].string() && r[j].user() == user && r[j].size() == size && r[j].returnEntry() == null && record.readAddress(j) == address) return j;
        }
        return -1;
    }

    /** The string read (of kernel, or {@code user} memory) the hit's site made at {@code address} ({@link RecordedProbeHits.Read#string}), or -1: none. */
    public int stringAt(long address, boolean user) {
        RecordedProbeHits.Read[] r = reads;
        for (int j = 0; j < r.length; j++) if (r[j].string() && r[j].user() == user && record.readAddress(j) == address) return j;
        return -1;
    }

    /**
     * String read {@code j} ({@link #stringAt}) as {@code strncpy_from_kernel_nofault} copies it into
     * {@code dst} at {@code offset}, at most {@code max} bytes with the NUL (a longer one truncated and
     * terminated): the bytes stored.
     */
    public int string(int j, byte[] dst, int offset, int max) {
        if (max <= 0) return 0;
        int len = record.stringLength(j);
        if (len <= max) {
            record.stringBytes(j, dst, offset, len);
            return len;
        }
        record.stringBytes(j, dst, offset, max - 1);
        dst[offset + max - 1] = 0;
        return max;
    }

    /** Read {@code j}'s bytes ({@link #readAt}) into {@code dst} at {@code offset}, little-endian, its size of them. */
    public void read(int j, byte[] dst, int offset) {
        long v = record.readValue(j);
        for (int i = 0, n = reads[j].size(); i < n; i++) dst[offset + i] = (byte) (v >>> (8 * i));
    }

    /** The hit's registers (writes are refused: a recordable handler writes nothing). */
    public Regs regs() { return regs; }

    /**
     * Where register {@code name} is among each record's registers (the same for every record of
     * this object), for {@link #register(int)}; IllegalStateException when records do not hold it.
     */
    public int registerIndex(String name) { return regs.indexOf(name); }

    /** The register at {@code index} ({@link #registerIndex}) of this hit. */
    public long register(int index) { return regs.register(index); }

    /** The guest time of the hit ({@link dev.kpemu.machine.VirtualClock#liveNanos} there). */
    public long guestNanos() { return machine.liveNanosAtExecuted(record.executed()); }

    /** The words captured at each hit ({@link Kprobes#recordHitsWith}: word 0 the current task); do not change them. */
    public RecordedProbeHits.Word[] words() { return words; }

    /** Whether captured word {@code k} was read at the hit. */
    public boolean wordRead(int k) { return record.wordRead(k); }

    /** Captured word {@code k}'s first 8 bytes as a little-endian value (0 past its size). */
    public long wordValue(int k) { return record.wordValue(k); }

    /** Captured word {@code k}'s bytes into {@code dst} at {@code offset} (its size of them). */
    public void word(int k, byte[] dst, int offset) { record.word(k, dst, offset); }

    /**
     * Whether every captured word and whether it was read are as in {@code key}, made by
     * {@link #copyWords} at an earlier hit: then whatever was computed from the words alone then
     * holds for this hit too.
     */
    public boolean wordsEqual(long[] key) { return record.wordsEqual(key); }

    /** The captured words and their read flags as a key for {@link #wordsEqual} ({@code key} reused when it fits, else a new array). */
    public long[] copyWords(long[] key) { return record.copyWords(key); }

    /**
     * Bytes of this hit's trace line as the native code formatted it ({@link RecordedHitHandler#lineFormat});
     * 0: none. Its timestamp is that of {@link #lineNanos()}.
     */
    public int lineLength() { return record.lineLength(); }

    /** The array that holds the line, from {@link #lineOffset()} (valid during the call only). */
    public byte[] lineBytes() { return record.lineBytes(); }

    /** Whether the line starts after its context columns (the native code did not know them: the handler puts them in front). */
    public boolean lineWithoutColumns() { return record.lineWithoutColumns(); }

    /** Where the line starts in {@link #lineBytes()}. */
    public int lineOffset() { return record.lineOffset(); }

    /** The guest time the line's timestamp shows (the handler takes the line only when it is {@link #guestNanos()}). */
    public long lineNanos() { return record.lineNanos(); }

    /**
     * Tells the native code, in its context {@code slot} (0 to 31), the context columns of hits like
     * this one: those whose words are {@code key} ({@link #copyWords}), with interrupts
     * {@code irqsOff}, of a line format of class {@code cls} ({@link RecordedHitHandler#lineFormat}),
     * get {@code columns}; with {@code taskColumns}, hits of any task in that state get the task's
     * columns written by the native code, then {@code columns} ({@link RecordedProbeHits#lineContext}).
     * Returns {@link #lineGeneration()}.
     */
    public long keepColumns(int slot, long[] key, boolean irqsOff, int cls, byte[] columns, boolean taskColumns) {
        RecordedProbeHits h = machine.recordedProbeHits();
        if (h == null) return 0;
        h.lineContext(slot, key, irqsOff, cls, columns, taskColumns);
        return h.lineGeneration();
    }

    /** Changes whenever the native code forgets the contexts it was told ({@link #keepColumns}). */
    public long lineGeneration() {
        RecordedProbeHits h = machine.recordedProbeHits();
        return h == null ? 0 : h.lineGeneration();
    }
}
