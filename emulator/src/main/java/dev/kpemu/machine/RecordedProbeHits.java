package dev.kpemu.machine;

/**
 * Probe hits a machine's native code records without an upcall ({@code kpemu_x86_probe_hits.c},
 * {@code kpemu_arm64_probe_hits.c}): at a breakpoint on a listed site, the registers the host
 * names and a few guest words (the current task, fields of it, per-CPU words) are read as the host
 * would read them there, and the guest goes on at the site's resume address. The host reads the
 * records back in order ({@link #drainTo}) before any other of its code sees the guest: the
 * machine drains them at the start of every hook upcall and when the engine returns (before
 * another vCPU runs: each vCPU records into its own ring), so a record's consumer runs as the
 * hit's handler would have, only later in host time, with the guest state of the hit and its vCPU
 * current.
 *
 * <p>Off ({@link #setEnabled}) every hit goes to the host's Java path, as without this.
 */
public interface RecordedProbeHits {
    /**
     * Where a captured word is: {@code offset} from nothing, from GS_BASE (x86-64), or from word 0's
     * value (the task); or no guest memory: {@link #REGISTER}'s value is the captured register
     * numbered {@code offset} (arm64: SP_EL0, the kernel's {@code current}, as word 0).
     */
    enum Base { ABSOLUTE, GS_BASE, TASK, REGISTER }

    /** A guest word read at each hit: {@code size} (1 to 16) bytes at {@code base} + {@code offset}. */
    record Word(Base base, long offset, int size) {
        public Word {
            if (size < 1 || size > 16) throw new IllegalArgumentException("a word of " + size + " bytes");
        }
    }

    /**
     * A read of guest memory a site's hits make besides the words ({@link #siteReads}): {@code size}
     * (1, 2, 4 or 8) bytes at {@code offset} from a captured register (the one numbered {@code base}
     * among the record's registers) or, {@code fromRead}, from the value of the site's read numbered
     * {@code base}, an earlier one (a dereference); or, {@code string}, the NUL-terminated string
     * there (size 0), at most {@link #STRING_BYTES} with its NUL. Kernel memory, or {@code user}
     * memory (below the user address limit, through the hit's page tables: x86-64 only); a read
     * that fails, or a string longer than that, leaves the hit to the host's Java path.
     */
    record Read(boolean fromRead, int base, long offset, int size, boolean string, boolean user, ReturnEntry returnEntry) {
        public Read {
            if (string ? size != 0 : size != 1 && size != 2 && size != 4 && size != 8) throw new IllegalArgumentException("a read of " + size + " bytes");
            if (base < 0 || base > 255) throw new IllegalArgumentException("a read's base " + base);
            if (returnEntry != null && (fromRead || string || user || size != 8 || offset != (int) offset)) {
                throw new IllegalArgumentException("a return address is 8 bytes at a register or in it");
            }
        }

        public Read(boolean fromRead, int base, long offset, int size, boolean string, boolean user) { this(fromRead, base, offset, size, string, user, null); }

        /** A read of a kernel value of {@code size} bytes. */
        public Read(boolean fromRead, int base, long offset, int size) { this(fromRead, base, offset, size, false, false); }

        /**
         * A kretprobe's entry, the last read of a plan: the return address, 8 bytes at register
         * {@code base} + {@code offset} (x86-64 {@code [rsp]}) or, {@code inRegister}, in register
         * {@code base} itself (arm64 x30), swapped for the trampoline when counter {@code counter}
         * has a free instance, which the hit takes ({@link #returnInstances}); {@code seenAfter}:
         * probes that run after the kretprobe's at the site see the trampoline there (the native
         * code leaves the hit to the host when one of them read it from memory; a register's
         * value in the record is then the trampoline).
         */
        public static Read returnAddress(int base, long offset, boolean inRegister, int counter, boolean seenAfter) {
            return new Read(false, base, offset, 8, false, false, new ReturnEntry(inRegister, counter, seenAfter));
        }

        /** A read of the kernel string at {@code offset} from the base. */
        public static Read string(boolean fromRead, int base, long offset) { return new Read(fromRead, base, offset, 0, true, false); }
    }

    /** What makes a {@link Read} a kretprobe's entry ({@link Read#returnAddress}). */
    record ReturnEntry(boolean inRegister, int counter, boolean seenAfter) {
        public ReturnEntry {
            if (counter < 0) throw new IllegalArgumentException("counter " + counter);
        }
    }

    /**
     * Kretprobe entries the native code may take ({@link Read#returnAddress}): the trampoline a
     * return address is swapped for, and each counter's instances free now, shared by every vCPU.
     * After {@link #siteReads}; only while no record waits. Empty: none.
     */
    default void returnInstances(long trampoline, int[] free) {
        if (free.length > 0) throw new UnsupportedOperationException("no kretprobe entries");
    }

    /** Counter {@code counter} ({@link #returnInstances}) gained {@code delta} free instances: one went back to its pool, or the host took one. */
    default void returnInstancesChanged(int counter, int delta) {}

    /**
     * Kretprobe returns the native code may record at the trampoline (after {@link #returnInstances},
     * whose counters these are): counter i's instances' returns when {@code recorded[i]}. A return is
     * recorded when the outstanding instances' table ({@link #returnInstanceAdd}) is complete and holds
     * exactly one instance of the return's frame key (the register numbered {@code returnFrame} among
     * the record's + {@code returnFrameOffset}), one whose return address is not the trampoline: its
     * record's {@link Record#site()} is {@link #returnSite} of the instance's slot, the slot is freed,
     * its counter gains the instance, and the guest goes on at its return address. An entry the native
     * code records puts its instance in the table too (its frame key the register numbered
     * {@code entryFrame}), and its return-address read's {@link Record#readAddress} is then the slot.
     * Without a table (the default) neither is recorded.
     */
    default void returnsRecorded(boolean[] recorded, int returnFrame, long returnFrameOffset, int entryFrame) {}

    /** The {@link Record#site()} of a return recorded at {@code slot} of the instances' table: negative, unlike a site's. */
    static int returnSite(int slot) { return Integer.MIN_VALUE | slot; }

    /** The instances' table slot of a return's record ({@link #returnSite}). */
    static int returnSlot(int site) { return site & Integer.MAX_VALUE; }

    /**
     * An instance the host took (frame key, task, the return address swapped, its counter or -1:
     * its return is the host's) into the table the native code matches returns in: its slot, or -1
     * when the table is full (the table is then incomplete and no return is recorded until every
     * instance the host holds has a slot again: {@link #returnInstancesComplete}).
     */
    default int returnInstanceAdd(long frame, long task, long returnAddress, int counter) { return -1; }

    /** The instance at {@code slot} went back (its return or its task's flush on the host's path). */
    default void returnInstanceRemove(int slot) {}

    /** The instance at {@code slot} belongs to counter {@code counter} now (-1: its return is the host's). */
    default void returnInstanceCounter(int slot, int counter) {}

    /** Whether every instance the host holds has a slot in the table (at the start: yes). */
    default void returnInstancesComplete(boolean complete) {}

    /** Kretprobe returns recorded natively so far. */
    default long returnsRecorded() { return 0; }

    /** Bytes of strings a record holds (each with its NUL). */
    int STRING_BYTES = 256;

    /** Most registers, words and reads of a site a record holds. */
    int MAX_REGISTERS = 40, MAX_WORDS = 8, MAX_READS = 8;

    /**
     * What each hit reads: the engine's registers {@code ids} (the vCPU's mode register among them:
     * x86-64 CS, with GS_BASE; arm64 PSTATE), and
     * {@code words} (word 0 the task pointer when any is {@link Base#TASK}-relative). Only while
     * no record waits.
     */
    void capture(int[] ids, Word[] words);

    /** The sites: probe addresses and where the guest goes on after each (replaces the earlier ones; empty: none). */
    void sites(long[] addresses, long[] resume);

    void setEnabled(boolean on);

    /** While set, every hit goes to the host (one of its hits is in flight). */
    void setBusy(boolean busy);

    /** Hits recorded natively so far. */
    long recorded();

    /** One record while it is read ({@link #drainTo}). */
    interface Record {
        /** The index of the site (as given to {@link #sites}), or a kretprobe's return ({@link #returnSite}: negative). */
        int site();

        /** The instruction clock's count of executed instructions at the hit. */
        long executed();

        /** Register {@code i} (of the ids given to {@link #capture}). */
        long register(int i);

        /** Whether word {@code k} was read (its address mapped to RAM, a kernel address). */
        boolean wordRead(int k);

        /** Word {@code k}'s first 8 bytes as a little-endian value (the bytes past its size are 0). */
        long wordValue(int k);

        /** Word {@code k}'s bytes into {@code dst} at {@code offset} (its size of them). */
        void word(int k, byte[] dst, int offset);

        /**
         * Whether every word and its read flag is as in {@code key} ({@link #copyWords}: the
         * same guest state where the hit read its words; a key of another length never is).
         */
        boolean wordsEqual(long[] key);

        /** The words and their read flags as a key for {@link #wordsEqual} (a new array when {@code key} is not its length). */
        long[] copyWords(long[] key);

        /** The address read {@code j} of the hit's site read ({@link #siteReads}). */
        default long readAddress(int j) { throw new IndexOutOfBoundsException(j); }

        /** The value read {@code j} read, zero-extended. */
        default long readValue(int j) { throw new IndexOutOfBoundsException(j); }

        /** Length with its NUL of the string read {@code j} read (a {@link Read#string} read). */
        default int stringLength(int j) { throw new IndexOutOfBoundsException(j); }

        /** The first {@code n} bytes of the string read {@code j} read into {@code dst} at {@code offset}. */
        default void stringBytes(int j, byte[] dst, int offset, int n) { throw new IndexOutOfBoundsException(j); }

        /** Bytes of the trace line the native code formatted for this hit ({@link #lineFormats}); 0: none. */
        default int lineLength() { return 0; }

        /** Whether the line lacks its context columns (the native code did not know them): the host puts them in front. */
        default boolean lineWithoutColumns() { return false; }

        /** Where the line starts in {@link #lineBytes()}. */
        default int lineOffset() { return 0; }

        /**
         * The array that holds the line (valid until the drain's {@link Reader#drained} returns).
         * A newline follows every line there, so the lines of records one after the other, each at
         * the end of the one before plus its newline, are one piece of trace text.
         */
        default byte[] lineBytes() { return null; }

        /** The guest nanoseconds the line's timestamp shows. */
        default long lineNanos() { return 0; }
    }

    /**
     * The reads of guest memory each site's hits make besides the words, {@code readsOfSite[i]}
     * site i's (null or empty: none; at most {@link #MAX_READS}), read at the hit into the record
     * ({@link Record#readAddress}, {@link Record#readValue}); null: none at all. After {@link #sites},
     * only while no record waits. Without it, a site whose handler needs reads must not be a site.
     */
    default void siteReads(Read[][] readsOfSite) {
        if (readsOfSite != null) for (Read[] r : readsOfSite) if (r != null && r.length > 0) throw new UnsupportedOperationException("no site reads");
    }

    /**
     * The sites' trace line formats ({@code kpemu_probe_hits.h} kpemu_hits_format): site i's at
     * {@code formatOfSite[i]} of {@code blob} (-1: none); null: no line. After {@link #sites}.
     */
    default void lineFormats(byte[] blob, int[] formatOfSite) { lineFormats(blob, formatOfSite, null); }

    /**
     * As above, and the formats of recorded returns' lines ({@link #returnsRecorded}): counter i's
     * at {@code formatOfCounter[i]} (-1: none; null: none at all), whose head is empty: the native
     * code writes a return's line only with a head it was told for its counter and return address
     * ({@link #returnHead}). The heads told are forgotten.
     */
    default void lineFormats(byte[] blob, int[] formatOfSite, int[] formatOfCounter) {}

    /**
     * The head of the lines of counter {@code counter}'s returns to {@code returnAddress}
     * ({@code "EVENT: (caller+0x1f/0x80 <- func)"}), kept in the native code's {@code slot} (0 to
     * {@link #RETURN_HEADS} - 1, replacing what it held), the current vCPU's; a head longer than it
     * keeps empties the slot. Forgotten at the next {@link #lineFormats}.
     */
    default void returnHead(int slot, int counter, long returnAddress, byte[] head) {}

    /** Heads of returns' lines the native code keeps ({@link #returnHead}). */
    int RETURN_HEADS = 16;

    /**
     * The context columns {@code columns} of hits whose words are {@code key} ({@link Record#copyWords}),
     * interrupt state {@code irqsOff} and format class {@code cls}, kept in the native code's
     * {@code slot} (0 to 31, replacing what it held): the native code may format their lines (the
     * current vCPU's). With {@code taskColumns}, words 0, 1 and 2 are the current task, its pid (4
     * bytes) and its comm ({@link #TASK_WORDS}): the context is every hit whose other words and read
     * flags are {@code key}'s, whatever its task, and {@code columns} are those after the task's,
     * which the native code writes itself ({@code "%16s-%-7d "} of the comm, {@code <idle>} for pid
     * 0, and the pid; a hit whose task it cannot write so gets no columns).
     */
    default void lineContext(int slot, long[] key, boolean irqsOff, int cls, byte[] columns, boolean taskColumns) {}

    /** The words a context with task columns leaves out of its key ({@link #lineContext}): the task, its pid and its comm. */
    int TASK_WORDS = 3;

    /** Lines the native code has formatted so far ({@link #lineFormats}). */
    default long linesFormatted() { return 0; }

    /** Changes whenever the native code forgets the contexts it was given ({@link #lineContext}): they must be given again. */
    default long lineGeneration() { return 0; }

    /**
     * Who reads the records back: each record in order ({@link #accept}), then {@link #drained}
     * once, while the last one's line bytes are still valid.
     */
    interface Reader extends java.util.function.Consumer<Record> {
        /** After the last record of a drain (records hand over their lines, {@link Record#lineBytes}, valid until this returns). */
        default void drained() {}
    }

    /** Hands each waiting record to {@code reader}, oldest first, then tells it they are drained, and forgets them. */
    void drainTo(Reader reader);

    /** Whether records wait. */
    boolean pending();
}
