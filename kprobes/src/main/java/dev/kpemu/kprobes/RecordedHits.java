package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.RecordedProbeHits;

/**
 * The engine's side of hits recorded by the machine's native code ({@link RecordedProbeHits}):
 * which probe points the native code may take at their {@code int3} (the site table), and reading
 * the records back into the probes' {@link RecordedHitHandler}s, in order.
 *
 * <p>A point is recorded natively when it is armed and boosted (its hit runs no handler of the
 * engine's own and goes on at the boosted copy, as {@link HitPath} would send it) and of the kind
 * the arch records ({@link ArchKprobes#recordedEntry}: x86-64 ftrace sites, arm64 breakpoints),
 * no optimization is queued for it, and every enabled probe at it is an entry probe with a
 * {@link RecordedHitHandler} that says {@link RecordedHitHandler#recordable()} and no post or
 * fault handler. The machine must offer recording (a ring per vCPU, read back before another
 * vCPU runs) and the words to capture must be known ({@link Kprobes#recordHitsWith}).
 *
 * <p>Every change of the engine's probes, of their arming, of an optimizer's detours
 * ({@link ProbeOptimizer.Engine#detourChanged}) and of what a handler says turns the table off at
 * once ({@link #changed}: every hit takes {@link HitPath} again); the next safe point builds it
 * anew. While a hit of the engine's is in flight on the vCPU ({@link Activations}) the
 * native code sends every hit to Java, which counts it missed as Linux would.
 *
 * <p>A kretprobe's entry probe at a point (one, with no entry handler) is recorded too, as
 * {@code pre_handler_kretprobe} runs at the hit: the site's plan ends with the return address's
 * read ({@link RecordedProbeHits.Read#returnAddress}, the arch's {@link ArchKprobes#recordedReturnSlot}),
 * which the native code swaps for the trampoline while the kretprobe's count of free instances
 * (kept with its pool: {@link ReturnProbes#onPoolChanged}) has one; the replay takes the instance
 * from the pool, with the hit's frame key, task and return address, before the other handlers run.
 *
 * <p>A kretprobe's return is recorded at the trampoline when its kretprobe's handler is a
 * {@link RecordedReturnHandler} that says {@link RecordedReturnHandler#returnRecordable()}: the
 * native code keeps a table of the outstanding instances (those it takes and those
 * {@link ReturnProbes} takes, {@link ReturnProbes.InstanceTable}), matches the return's frame key
 * there as the Java path does, and records the return when the frame has one instance; the replay
 * finds the instance by its slot ({@link ReturnProbes#recordedReturn}). Every kretprobe with such a
 * handler gets a counter, its entries recorded or not.
 *
 * <p>Lines passed on as text: a site whose probe gives a {@link RecordedHitHandler#lineSink} has
 * the records whose native line is complete read no further than their site and line. Consecutive
 * ones (the lines one piece of text in the record's buffer) go to the sink in one piece, and their
 * hits are counted per probe, before any other record is read and when the drain ends, so the
 * order of lines is the hits'. After a change (until the next table) every record is read whole.
 */
final class RecordedHits {
    private final Machine machine;
    private final ArchKprobes arch;
    private final ProbeTable table;
    private final OptimizerBridge optimizers;
    private final HandlerFailures failures;
    private RecordedProbeHits.Word[] words;
    private boolean dirty = true;
    private boolean captureSet;
    /** The points of the site table, by site index. */
    private ProbePoint[] sites = new ProbePoint[0];
    private RecordedHit hit;

    private final ReturnProbes returns;
    /** The kretprobes whose entries the site table records, by counter; their counters. */
    private Kretprobe[] counters = new Kretprobe[0];
    private final java.util.Map<Kretprobe, Integer> counterOf = new java.util.IdentityHashMap<>();
    /** The recorded registers of a kretprobe entry's frame key and return address (-1: none). */
    private int frameRegister = -1, returnRegister = -1;

    RecordedHits(Machine machine, ArchKprobes arch, ProbeTable table, OptimizerBridge optimizers, HandlerFailures failures, ReturnProbes returns) {
        this.machine = machine;
        this.arch = arch;
        this.table = table;
        this.optimizers = optimizers;
        this.failures = failures;
        this.returns = returns;
        returns.onPoolChanged((rp, delta) -> {
            Integer i = counterOf.get(rp);
            RecordedProbeHits h = i == null ? null : machine.recordedProbeHits();
            if (h != null) h.returnInstancesChanged(i, delta);
        });
        returns.instanceTable(new ReturnProbes.InstanceTable() {
            @Override
            public int add(Kretprobe rp, long frame, long task, long retAddr) {
                RecordedProbeHits h = machine.recordedProbeHits();
                return h == null ? -1 : h.returnInstanceAdd(frame, task, retAddr, counterOf(rp));
            }

            @Override
            public void remove(int slot) {
                RecordedProbeHits h = machine.recordedProbeHits();
                if (h != null) h.returnInstanceRemove(slot);
            }

            @Override
            public void orphaned(int slot) {
                RecordedProbeHits h = machine.recordedProbeHits();
                if (h != null) h.returnInstanceCounter(slot, -1);
            }

            @Override
            public void complete(boolean complete) {
                RecordedProbeHits h = machine.recordedProbeHits();
                if (h != null) h.returnInstancesComplete(complete);
            }
        });
    }

    /** {@code rp}'s counter in the table now, or -1: none (its instances' returns are the Java side's). */
    private int counterOf(Kretprobe rp) {
        Integer i = rp == null ? null : counterOf.get(rp);
        return i == null ? -1 : i;
    }

    /** The guest words each hit captures (word 0 the current task); null: no hit is recorded natively. */
    void words(RecordedProbeHits.Word[] w) {
        this.words = w == null ? null : w.clone();
        captureSet = false;
        changed();
    }

    /** Something the site table depends on changed: off until the next safe point builds it again. */
    void changed() {
        dirty = true;
        RecordedProbeHits h = machine.recordedProbeHits();
        if (h != null) h.setEnabled(false);
    }

    /** Hits recorded natively so far (0 without native recording). */
    long recorded() {
        RecordedProbeHits h = machine.recordedProbeHits();
        return h == null ? 0 : h.recorded();
    }

    /** Kretprobe entries read back from records so far. */
    long returnEntries() { return returnEntries; }

    private long returnEntries;

    /** Kretprobe returns read back from records so far. */
    long recordedReturns() { return recordedReturns; }

    private long recordedReturns, passedReturnLines;

    /** Recorded returns whose lines went to a sink as text so far. */
    long passedReturnLines() { return passedReturnLines; }
    /** Per counter, whether its returns are recorded (from the table's build). */
    private boolean[] returnsRecordedOf = new boolean[0];

    /** Recorded hits whose lines went to a sink as text so far. */
    long passedLines() { return passedTotal; }

    /** Lines of recorded hits formatted natively so far. */
    long linesFormatted() {
        RecordedProbeHits h = machine.recordedProbeHits();
        return h == null ? 0 : h.linesFormatted();
    }

    /** Between slices: the table built anew when something changed. */
    void onSafePoint() {
        if (!dirty) return;
        RecordedProbeHits h = machine.recordedProbeHits();
        if (h == null) return;
        machine.drainRecordedHits();
        dirty = false;
        String[] names = arch.recordedRegisters();
        if (words == null || names == null) {
            h.setEnabled(false);
            sites = new ProbePoint[0];
            return;
        }
        if (!captureSet) {
            int[] ids = new int[names.length];
            for (int i = 0; i < names.length; i++) ids[i] = arch.regs().engineIdOf(names[i]);
            h.capture(ids, words);
            hit = new RecordedHit(machine, arch.regs(), names, ids, arch.recordedEntry(), words);
            ArchKprobes.ReturnSlot slot = arch.recordedReturnSlot();
            frameRegister = slot == null ? -1 : hit.registerIndex(slot.frameRegister());
            returnRegister = slot == null || frameRegister < 0 ? -1 : hit.registerIndex(slot.register());
            machine.consumeRecordedHits(new RecordedProbeHits.Reader() {
                @Override public void accept(RecordedProbeHits.Record r) { replay(r); }
                @Override public void drained() { passLines(); }
            });
            captureSet = true;
        }
        counterOf.clear();
        List<Kretprobe> kretprobes = new ArrayList<>();
        List<ProbePoint> eligible = new ArrayList<>();
        List<RecordedProbeHits.Read[]> plans = new ArrayList<>();
        boolean anyReads = false;
        for (ProbePoint p : table.points.values()) {
            if (!recordable(p)) continue;
            RecordedProbeHits.Read[] r = memoryReads(p, kretprobes);
            if (r == null) continue;
            eligible.add(p);
            plans.add(r);
            anyReads |= r.length > 0;
        }
        long[] addresses = new long[eligible.size()], resume = new long[eligible.size()];
        for (int i = 0; i < addresses.length; i++) {
            addresses[i] = eligible.get(i).address;
            resume[i] = eligible.get(i).slot;
        }
        h.sites(addresses, resume);
        sites = eligible.toArray(new ProbePoint[0]);
        siteReads = plans.toArray(new RecordedProbeHits.Read[0][]);
        h.siteReads(anyReads ? siteReads : null);
        for (Kretprobe rp : returns.pooled()) {      // returns recorded: a counter for each kretprobe whose returns may be
            if (!returnRecordable(rp) || counterOf.containsKey(rp)) continue;
            counterOf.put(rp, kretprobes.size());
            kretprobes.add(rp);
        }
        counters = kretprobes.toArray(new Kretprobe[0]);
        int[] free = new int[counters.length];
        returnsRecordedOf = new boolean[counters.length];
        for (int i = 0; i < free.length; i++) {
            free[i] = Math.max(0, returns.freeInstances(counters[i]));
            returnsRecordedOf[i] = returnRecordable(counters[i]) && returnRegister >= 0;
        }
        h.returnInstances(returns.trampolineAddress(), free);
        if (returnRegister >= 0) {
            h.returnsRecorded(returnsRecordedOf, frameRegister, arch.recordedReturnSlot().returnFrameOffset(), frameRegister);
            returns.forEachInTable((rp, slot) -> h.returnInstanceCounter(slot, counterOf(rp)));
            h.returnInstancesComplete(returns.missingFromTable() == 0);
        }
        lineFormats(h);
        boolean anyReturns = false;
        for (boolean b : returnsRecordedOf) anyReturns |= b;
        h.setEnabled(addresses.length > 0 || anyReturns);
    }

    /** Per site, the reads of guest memory its hits make ({@link RecordedHitHandler#memoryReads}; empty: none). */
    private RecordedProbeHits.Read[][] siteReads = new RecordedProbeHits.Read[0][];

    /**
     * The reads of guest memory a point's hits make: its only enabled probe's plan, followed by a
     * kretprobe entry's return address (its counter added to {@code kretprobes}); empty when it
     * reads nothing; null when the point cannot be recorded (a plan refused, several enabled probes
     * of which one reads memory, more reads than a record holds; on an arch whose return address is
     * a register, probes both before and after the kretprobe's).
     */
    private RecordedProbeHits.Read[] memoryReads(ProbePoint p, List<Kretprobe> kretprobes) {
        RecordedProbeHits.Read[] plan = RecordedHitHandler.NO_READS;
        int enabled = 0;
        Kprobe entry = null;
        boolean before = false, after = false;
        for (Kprobe k : p.children) {
            if (k.isDisabled()) continue;
            if (k.owner != null) {
                entry = k;
                continue;
            }
            enabled++;
            if (entry == null) before = true;
            else after = true;
            RecordedProbeHits.Read[] r = k.recordedHitHandler().memoryReads(k, hit);
            if (r == null || r.length > RecordedProbeHits.MAX_READS) return null;
            if (r.length > 0) plan = r;
        }
        if (plan.length > 0 && enabled > 1) return null;
        if (entry == null) return plan;
        ArchKprobes.ReturnSlot slot = arch.recordedReturnSlot();
        if (returnRegister < 0 || plan.length + 1 > RecordedProbeHits.MAX_READS || slot.inRegister() && before && after) return null;
        RecordedProbeHits.Read[] withEntry = java.util.Arrays.copyOf(plan, plan.length + 1);
        Integer counter = counterOf.get(entry.owner);
        if (counter == null) {
            counterOf.put(entry.owner, counter = kretprobes.size());
            kretprobes.add(entry.owner);
        }
        withEntry[plan.length] = RecordedProbeHits.Read.returnAddress(returnRegister, slot.offset(), slot.inRegister(), counter, after);
        return withEntry;
    }

    /** Each site's line format, where its only enabled probe's handler gives one ({@link RecordedHitHandler#lineFormat}), and its sink. */
    private void lineFormats(RecordedProbeHits h) {
        lineProbes = new Kprobe[sites.length];
        lineSinks = new RecordedLineSink[sites.length];
        passed = new int[sites.length];
        passedSites = new int[sites.length];
        passedCount = 0;
        returnSinks = new RecordedLineSink[counters.length];
        returnFormatted = new boolean[counters.length];
        passedReturns = new int[counters.length];
        passedCounters = new int[counters.length];
        passedCounterCount = 0;
        if (!NATIVE_LINES) return;
        java.io.ByteArrayOutputStream blob = new java.io.ByteArrayOutputStream();
        int[] at = new int[sites.length];
        boolean any = false;
        for (int i = 0; i < sites.length; i++) {
            at[i] = -1;
            Kprobe only = onlyEnabled(sites[i]);
            byte[] f = only == null ? null : only.recordedHitHandler().lineFormat(only, hit);
            if (f == null) continue;
            lineProbes[i] = only;
            if (PASS_LINES && returnEntry(siteReads[i]) == null) lineSinks[i] = only.recordedHitHandler().lineSink(only);
            at[i] = blob.size();
            blob.writeBytes(f);
            any = true;
        }
        int[] ofCounter = new int[counters.length];
        for (int c = 0; c < counters.length; c++) {
            ofCounter[c] = -1;
            Kretprobe rp = counters[c];
            byte[] f = returnsRecordedOf[c] ? rp.recordedReturnHandler().returnLineFormat(rp, hit) : null;
            if (f == null) continue;
            returnFormatted[c] = true;
            if (PASS_LINES) returnSinks[c] = rp.recordedReturnHandler().returnLineSink(rp);
            ofCounter[c] = blob.size();
            blob.writeBytes(f);
            any = true;
        }
        if (any) h.lineFormats(blob.toByteArray(), at, ofCounter);
    }

    /** Per counter, where its returns' complete lines go as text (null: through the handler), and whether the native code has their format. */
    private RecordedLineSink[] returnSinks = new RecordedLineSink[0];
    private boolean[] returnFormatted = new boolean[0];
    /** Per counter, returns of the run not yet counted; the counters with any, {@code passedCounters[0, passedCounterCount)}. */
    private int[] passedReturns = new int[0], passedCounters = new int[0];
    private int passedCounterCount;

    /** Native line formatting ({@code -Dkpemu.recordedLines=false}: every recorded hit formatted by its handler, for comparisons). */
    static final boolean NATIVE_LINES = !"false".equals(System.getProperty("kpemu.recordedLines"));

    /** Per site, the probe whose line the native code formats (null: none). */
    private Kprobe[] lineProbes = new Kprobe[0];

    /** Lines passed on as text ({@code -Dkpemu.passLines=false}: each through its handler, for comparisons). */
    static final boolean PASS_LINES = !"false".equals(System.getProperty("kpemu.passLines"));

    /** Per site, where its complete lines go as text (null: through the handler); from the table's build until a change. */
    private RecordedLineSink[] lineSinks = new RecordedLineSink[0];
    /** The run of lines not yet passed on: {@code text[runStart, runEnd)}, to {@link #runSink}. */
    private byte[] runText;
    private int runStart, runEnd;
    private RecordedLineSink runSink;
    /** Per site, hits of the run not yet counted; the sites with any, {@code passedSites[0, passedCount)}. */
    private int[] passed = new int[0], passedSites = new int[0];
    private int passedCount;
    private long passedTotal;

    /** The point's only enabled probe but a kretprobe's entry probe, or null. */
    private static Kprobe onlyEnabled(ProbePoint p) {
        Kprobe only = null;
        List<Kprobe> children = p.children;
        for (int i = 0; i < children.size(); i++) {
            Kprobe k = children.get(i);
            if (k.isDisabled() || k.owner != null) continue;
            if (only != null) return null;
            only = k;
        }
        return only;
    }

    /** Whether {@code rp}'s returns may be recorded at the trampoline: registered, its handler a {@link RecordedReturnHandler} that says so. */
    private static boolean returnRecordable(Kretprobe rp) {
        RecordedReturnHandler r = rp.recordedReturnHandler();
        return r != null && rp.handler() != null && r.returnRecordable();
    }

    private boolean recordable(ProbePoint p) {
        if (!p.armed || p.ftrace != (arch.recordedEntry() == Regs.Entry.FTRACE) || !p.boosted || p.slot == 0) return false;
        if (optimizers.detourFor(p.address) != -1) return false;
        boolean any = false;
        int entries = 0;
        for (Kprobe k : p.children) {
            if (k.isDisabled()) continue;
            if (k.owner != null) {
                // a kretprobe's entry: recorded as pre_handler_kretprobe runs when it has no entry handler (one a point)
                if (++entries > 1 || !returns.entryRecordable(k.owner) || k.postHandler() != null || k.faultHandler() != null) return false;
                any = true;
                continue;
            }
            RecordedHitHandler r = k.recordedHitHandler();
            if (k.owner != null || r == null || k.postHandler() != null || k.faultHandler() != null || !r.recordable()) return false;
            any = true;
        }
        return any;
    }

    /** A record read back: the point's enabled probes' handlers, in the order {@link HitPath} runs them. */
    private void replay(RecordedProbeHits.Record r) {
        int site = r.site();
        if (site < 0) {         // a kretprobe's return, at the trampoline
            replayReturn(r, RecordedProbeHits.returnSlot(site));
            return;
        }
        RecordedLineSink sink = dirty ? null : lineSinks[site];
        if (sink != null && r.lineLength() > 0 && !r.lineWithoutColumns() && r.lineNanos() == machine.liveNanosAtExecuted(r.executed())) {
            addToRun(sink, r);
            if (passed[site]++ == 0) passedSites[passedCount++] = site;
            return;
        }
        passLines();
        ProbePoint p = sites[site];
        RecordedProbeHits.Read[] plan = siteReads[site];
        RecordedHit x = hit.at(r, plan);
        RecordedProbeHits.ReturnEntry entry = returnEntry(plan);
        if (entry != null) {
            // the native code took an instance and swapped the return address, whatever changed since
            returnEntries++;
            returns.recordedEntry(counters[entry.counter()], r.register(frameRegister), r.wordRead(0) ? r.wordValue(0) : 0,
                    r.readValue(plan.length - 1), (int) r.readAddress(plan.length - 1));
        }
        Kprobe line = r.lineLength() > 0 ? lineProbes[site] : null;
        List<Kprobe> children = p.children;
        for (int i = 0; i < children.size(); i++) {
            Kprobe k = children.get(i);
            if (k.isDisabled() || k.owner != null) continue;
            try {
                if (k == line) k.recordedHitHandler().onRecordedLine(k, x);
                else k.recordedHitHandler().onRecordedHit(k, x);
            } catch (Throwable t) {
                failures.handlerFailed(k, "pre", t);
            }
        }
    }

    /** A return recorded at the trampoline, of the instance at {@code slot} of the native code's table. */
    private void replayReturn(RecordedProbeHits.Record r, int slot) {
        recordedReturns++;
        KretprobeInstance ri = returns.takeRecorded(slot);
        if (ri == null) return;
        int c = counterOf(ri.rp);
        RecordedLineSink sink = dirty || c < 0 || c >= returnSinks.length ? null : returnSinks[c];
        if (sink != null && r.lineLength() > 0 && !r.lineWithoutColumns() && r.lineNanos() == machine.liveNanosAtExecuted(r.executed())) {
            returns.recordedReturnPassed(ri);
            addToRun(sink, r);
            if (passedReturns[c]++ == 0) passedCounters[passedCounterCount++] = c;
            passedReturnLines++;
            return;
        }
        passLines();
        returns.recordedReturn(ri, r, hit, c, c >= 0 && c < returnFormatted.length && returnFormatted[c]);
    }

    /** The kretprobe entry a site's plan ends with, or null. */
    private static RecordedProbeHits.ReturnEntry returnEntry(RecordedProbeHits.Read[] plan) {
        return plan == null || plan.length == 0 ? null : plan[plan.length - 1].returnEntry();
    }

    /** {@code r}'s complete line, after the run waiting when it continues it in the same text to the same sink, else after passing that one on. */
    private void addToRun(RecordedLineSink sink, RecordedProbeHits.Record r) {
        byte[] text = r.lineBytes();
        int at = r.lineOffset();
        if (sink != runSink || text != runText || at != runEnd) {
            passLines();
            runSink = sink;
            runText = text;
            runStart = at;
        }
        runEnd = at + r.lineLength() + 1;
        passedTotal++;
    }

    /** The run of lines waiting, to its sink; its hits counted. */
    private void passLines() {
        RecordedLineSink sink = runSink;
        if (sink == null) return;
        runSink = null;
        try {
            sink.acceptLines(runText, runStart, runEnd - runStart);
        } catch (Throwable t) {
            failures.handlerFailed(passedCount > 0 ? lineProbes[passedSites[0]] : counters[passedCounters[0]].kp, "pre", t);
        }
        runText = null;
        for (int i = 0; i < passedCount; i++) {
            int site = passedSites[i], n = passed[site];
            passed[site] = 0;
            Kprobe k = lineProbes[site];
            try {
                k.recordedHitHandler().onRecordedLines(k, n);
            } catch (Throwable t) {
                failures.handlerFailed(k, "pre", t);
            }
        }
        passedCount = 0;
        for (int i = 0; i < passedCounterCount; i++) {
            int c = passedCounters[i], n = passedReturns[c];
            passedReturns[c] = 0;
            Kretprobe rp = counters[c];
            try {
                rp.recordedReturnHandler().onRecordedReturnLines(rp, n);
            } catch (Throwable t) {
                failures.handlerFailed(rp.kp, "return", t);
            }
        }
        passedCounterCount = 0;
    }
}
