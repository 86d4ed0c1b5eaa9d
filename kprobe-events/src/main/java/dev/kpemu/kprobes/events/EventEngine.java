package dev.kpemu.kprobes.events;

import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterParseException;
import dev.kpemu.kprobes.events.hist.HistTrigger;
import dev.kpemu.kprobes.events.hist.HistTriggerException;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.KernelProbeRules;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.Kretprobe;
import dev.kpemu.kprobes.KretprobeInstance;
import dev.kpemu.kprobes.RecordedHit;
import dev.kpemu.kprobes.RecordedHitHandler;
import dev.kpemu.kprobes.RecordedReturnHandler;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.RecordedProbeHits;
import dev.kpemu.machine.WatchHit;

import java.io.PrintStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Linux's {@code kprobe_events} on a running guest: the tracefs files of the kprobe-event
 * subsystem ({@code kernel/trace/trace_kprobe.c}, Linux 6.1 by default) over kpemu's
 * {@link Kprobes} engine.
 *
 * <ul>
 * <li>{@link #write(String)} is a write to {@code kprobe_events}: each definition becomes a
 *     kprobe or kretprobe registered on the engine (disabled, as the kernel registers them);
 *     a definition naming an existing event appends a probe to it (multiprobe:
 *     {@code DIFF_PROBE_TYPE}, {@code DIFF_ARG_TYPE}, {@code SAME_PROBE}); {@code -:EVENT}
 *     deletes; registration failures are logged like the kernel's ({@code BAD_INSN_BNDRY},
 *     {@code BAD_PROBE_ADDR}, {@code FAIL_REG_PROBE}) in {@link #errorLog()}.</li>
 * <li>{@link #enable(String)} / {@link #disable(String)}: {@code events/GRP/EVENT/enable}.</li>
 * <li>Each hit of an enabled event fetches its arguments from the trapped registers and guest
 *     memory ({@link MachineFetchContext}) and records one event ({@link TraceRecord}: the
 *     fetched entry, its arguments' text formatted when it is read), printed to the output
 *     stream if there is one and handed to the listeners.</li>
 * <li>{@link #listing()}, {@link #profile()}, {@link #format(String)} / {@link #formats()}:
 *     {@code kprobe_events}, {@code kprobe_profile}, {@code events/GRP/EVENT/format}.</li>
 * </ul>
 *
 * <p>The trace context of a line: comm and pid of the guest's current task ({@link TaskLayout};
 * {@code <...>-0} when unknown, {@code <idle>} for pid 0), the cpu of the vCPU that hit ({@link Machine#cpu()}), and the
 * latency column Linux prints ({@link LatencyLayout}: the guest's interrupt flag, preempt_count,
 * TIF flags and migration_disabled at the hit, plus what Linux's path for the probe adds,
 * {@link LatencyPaths}); with no kernel structures (bare-metal guests) only irqs-off, from the
 * trapped context's RFLAGS.IF / PSTATE.I. The timestamp is guest time ({@link dev.kpemu.machine.VirtualClock#liveNanos()}).
 *
 * <p>Filters and hist triggers ({@link #setFilter}, {@link #addTrigger}, {@link #hist}) work as
 * the kernel's {@code __event_trigger_test_discard}: every hit of an event that is enabled or has
 * a trigger is fetched; the triggers see it first; then a disabled event (soft mode) or a record
 * the event's filter rejects is discarded, the rest are traced.
 *
 * <p>Not emulated: {@code within_notrace_func} (Linux refuses functions without an ftrace site
 * unless CONFIG_KPROBE_EVENTS_ON_NOTRACE), perf users of the events, event ids of the guest's static events (ids are given
 * from {@link #firstEventId(int)} upward, never reused, as the kernel's {@code next_event_type}).
 *
 * <p>Everything runs on the emulating thread; handlers run inside the engine's hit path.
 */
public final class EventEngine implements AutoCloseable {
    /** {@code TRACING_LOG_ERRS_MAX}: error_log keeps the last 8 entries. */
    public static final int ERROR_LOG_MAX = 8;
    /** Default id of the first event created (the kernel's depends on its static events). */
    public static final int DEFAULT_FIRST_EVENT_ID = 2000;

    /** One event ({@code struct trace_probe_event}): a name and the probes firing it. */
    private static final class Event {
        final String group, name;
        final boolean isReturn;
        final int id;
        final List<Probe> probes = new ArrayList<>(1);
        /** {@code events/GRP/EVENT/enable}. */
        boolean enabled;
        /** Whether the probes are enabled in the engine: the event is enabled, or a trigger keeps it in soft mode. */
        boolean armed;
        /** {@code events/GRP/EVENT/filter} (null: none). */
        EventFilter filter;
        /** The hist triggers of {@code events/GRP/EVENT/trigger}, oldest first. */
        final List<HistTrigger> triggers = new ArrayList<>(0);
        /** The {@code set_wprobe}/{@code clear_wprobe} triggers of {@code events/GRP/EVENT/trigger}. */
        final List<WprobeTrigger> wprobeTriggers = new ArrayList<>(0);

        boolean hasTriggers() { return !triggers.isEmpty() || !wprobeTriggers.isEmpty(); }

        Event(String group, String name, boolean isReturn, int id) {
            this.group = group;
            this.name = name;
            this.isReturn = isReturn;
            this.id = id;
        }

        String key() { return group + "/" + name; }
    }

    /** One probe of an event ({@code struct trace_kprobe}). */
    private final class Probe implements RecordedHitHandler, RecordedReturnHandler {
        final TraceProbe def;
        final CompiledProbe compiled;
        Event event;
        /** The engine's probe: a kprobe, or a kretprobe for a return event (null before registration). */
        dev.kpemu.kprobes.Probe engineProbe;
        boolean registered;
        long nhit;
        /** The ip the event reports when it is not the probe's address (an arm64 fprobe: its ftrace site), else 0. */
        long reportedIp;
        /** The function of an fprobe whose filter is a glob (one probe per match), or null: the definition's. */
        String function;
        /** A tracepoint probe's hold on its tracepoint, or null. */
        TracepointHook hook;
        /** A wprobe's watch, or null (none, or a wprobe at address 0: nothing watched). */
        WatchedRange watch;
        /** A wprobe's watched address ({@code tw->addr}, its {@code $addr}). */
        long watchAddress;
        /** The address its triggers last asked for (moved at the next safe point). */
        long targetAddress;

        Probe(TraceProbe def, CompiledProbe compiled) {
            this.def = def;
            this.compiled = compiled;
        }

        /** The last {@link #head}'s probe address and text: a kprobe's is the same at every hit. */
        private long headIp = -1;
        private String headText;
        /** A return's head for {@link #headIp} and the return address {@code returnHeadRetIp}. */
        private long returnHeadRetIp = -1;
        private String returnHeadText;

        /**
         * {@code EVENT: (sym+0xoff/0xsize)} or {@code EVENT: (ret+0xoff/0xsize <- func)}, resolved
         * at the hit (a module's symbols may be gone when the record is read); the arguments are
         * formatted when the record is read ({@link TraceRecord#body()}).
         */
        String head(boolean isReturn, long ip, long retIp) {
            if (isReturn) {
                if (ip != headIp) {
                    headIp = ip;
                    headText = formatter.ipSym(ip, false);
                    returnHeadRetIp = -1;
                }
                if (retIp != returnHeadRetIp) {     // most returns go back to the caller of the return before
                    returnHeadRetIp = retIp;
                    returnHeadText = def.event() + ": (" + formatter.ipSym(retIp, true) + " <- " + headText + ")";
                }
                return returnHeadText;
            }
            if (ip != headIp) {
                headIp = ip;
                headText = def.event() + ": (" + formatter.ipSym(ip, true) + ")";
            }
            return headText;
        }

        /** {@link #head}'s bytes (kept while the head is the same string). */
        byte[] headBytes(boolean isReturn, long ip, long retIp) {
            String h = head(isReturn, ip, retIp);
            if (h != headBytesOf) {
                headBytes = GuestText.encode(h);
                headBytesOf = h;
            }
            return headBytes;
        }

        private String headBytesOf;
        private byte[] headBytes;

        long misses() {
            return engineProbe == null ? 0 : engineProbe.missed();
        }

        int onEntry(Kprobe k, Regs regs) {
            nhit++;
            if (!event.armed) return 0;
            ctx.begin(regs);
            if (!compiled.fetch(ctx, buffer.entryData(null))) {
                dropped++;
                return 0;
            }
            long ip = reportedIp != 0 ? reportedIp : k.address();
            emit(this, false, ip, 0, buffer, entryPath(this, regs));
            return 0;
        }

        /**
         * Whether the machine's native code may record this probe's hits ({@link RecordedHit}):
         * an enabled event without triggers whose fetches read registers, or kernel memory the
         * native code can read for it ({@link #memoryReads}), not a tracepoint's probe, while the
         * engine allows it ({@link #recordingAllowed}).
         */
        @Override
        public boolean recordable() {
            return recordingAllowed() && event.enabled && event.armed && !event.hasTriggers()
                    && (!compiled.readsMemory() || compiled.plansReads())
                    && !(def instanceof FprobeDef f && f.tracepoint());
        }

        /** The kernel memory its fetches read, for the native code to read at the hit ({@link CompiledProbe#recordedReads}). */
        @Override
        public RecordedProbeHits.Read[] memoryReads(Kprobe k, RecordedHit layout) {
            if (!compiled.readsMemory()) return NO_READS;
            return compiled.recordedReads(slot -> ctx.recordedIndexOfSlot(layout, slot));
        }

        /** {@link #onEntry} from a recorded hit: the same record, its context read from what the hit captured. */
        @Override
        public void onRecordedHit(Kprobe k, RecordedHit hit) {
            nhit++;
            if (!event.armed) return;
            recordedEntry(k, hit);
        }

        private void recordedEntry(Kprobe k, RecordedHit hit) {
            ctx.beginRecorded(hit);
            if (!compiled.fetch(ctx, buffer.entryData(null))) {
                dropped++;
                return;
            }
            long ip = reportedIp != 0 ? reportedIp : k.address();
            emit(this, false, ip, 0, buffer, entryPath(this, hit.regs()), hit.guestNanos(), hit);
        }

        @Override
        public byte[] lineFormat(Kprobe k, RecordedHit layout) { return EventEngine.this.lineFormat(this, k, layout); }

        /** A recorded hit whose line the native code may have formatted: that line when it is the one {@link #onRecordedHit} would make. */
        @Override
        public void onRecordedLine(Kprobe k, RecordedHit hit) {
            nhit++;
            if (!event.armed) return;
            if (!emitLine(this, hit)) recordedEntry(k, hit);
        }

        /** While {@link #lineFormat} holds (the engine is told of every change that ends it), lines go to the engine's listeners as they are. */
        @Override
        public dev.kpemu.kprobes.RecordedLineSink lineSink(Kprobe k) {
            return lineListeners != null && event.armed && takesLine(event) ? passedLines : null;
        }

        @Override
        public void onRecordedLines(Kprobe k, int n) {
            nhit += n;
            recorded += n;
        }

        /**
         * A wprobe's hit ({@code wprobe_trace_handler}): the record's ip is where the hardware
         * reports the access (x86-64: the instruction after it, its data breakpoints trap after
         * the access; arm64: the accessing instruction, its watchpoints report before it), the
         * fetch arguments read the registers and memory at that point.
         */
        void onWatch(WatchHit hit) {
            nhit++;
            if (!event.armed) return;
            ctx.begin(null);
            ctx.watchAddress(watchAddress);
            if (!compiled.fetch(ctx, buffer.entryData(null))) {
                dropped++;
                return;
            }
            emit(this, false, reportedWatchIp(hit.pc()), 0, buffer, LatencyPaths.Path.WATCHPOINT);
        }

        /**
         * Whether the machine's native code may record this return event's returns: as
         * {@link #recordable()}, and its fetches read no memory (registers, {@code $retval}, the
         * entry's saved arguments).
         */
        @Override
        public boolean returnRecordable() { return recordable() && !compiled.readsMemory(); }

        /** {@link #onReturn} from a recorded return: the same record, its context read from what the return captured. */
        @Override
        public void onRecordedReturn(KretprobeInstance ri, RecordedHit hit) {
            nhit++;
            if (!event.armed) return;
            long func = engineProbe.entryProbe().address(), ret = ri.returnAddress();
            if (hit.lineLength() > 0 && emitLine(this, hit)) return;
            ctx.beginRecorded(hit);
            boolean ok = compiled.fetch(ctx, buffer.entryData(ri.data()));
            buffer.entryData(null);
            if (!ok) {
                dropped++;
                return;
            }
            emit(this, true, func, ret, buffer, returnPath(this), hit.guestNanos(), hit);
            // the native code writes the lines of later returns to this address itself once it knows their head
            if (hit.lineLength() == 0) hit.keepReturnHead(headBytes(true, func, ret));
        }

        @Override
        public byte[] returnLineFormat(Kretprobe rp, RecordedHit layout) { return EventEngine.this.returnLineFormat(this, layout); }

        /** As an entry's ({@link #lineSink}). */
        @Override
        public dev.kpemu.kprobes.RecordedLineSink returnLineSink(Kretprobe rp) { return lineSink(rp.kprobe()); }

        @Override
        public void onRecordedReturnLines(Kretprobe rp, int n) { onRecordedLines(rp.kprobe(), n); }

        int onReturn(KretprobeInstance ri, Regs regs) {
            nhit++;
            if (!event.armed) return 0;
            ctx.begin(regs);
            boolean ok = compiled.fetch(ctx, buffer.entryData(ri.data()));
            buffer.entryData(null);
            if (!ok) {
                dropped++;
                return 0;
            }
            long func = engineProbe.entryProbe().address();
            long ret = ri.returnAddress();
            emit(this, true, func, ret, buffer, returnPath(this));
            return 0;
        }
    }

    private final Kprobes kprobes;
    private final Machine machine;
    private final Arch arch;
    private final KernelSymbols symbols;
    private final TraceFormatter formatter;
    private final MachineFetchContext ctx;
    /** The kernel's layout for the latency column (null: only the interrupt state is known). */
    private KernelStructs structs;
    private LatencyLayout latency;
    /** Whether an fprobe was ever registered (ftrace_ops are counted only then). */
    private boolean anyFprobe;
    private final CompiledProbe.FetchBuffer buffer = new CompiledProbe.FetchBuffer();
    /** Every probe in creation order (the dyn_event list: listing and profile order). */
    private final List<Probe> probes = new ArrayList<>();
    private final Map<String, Event> events = new LinkedHashMap<>();
    private final Set<String> foreignEvents = new HashSet<>();
    private final List<Consumer<TraceRecord>> listeners = new CopyOnWriteArrayList<>();
    /** {@link #listeners} as an array, made again at each change: a hit iterates it without an iterator object. */
    @SuppressWarnings("unchecked")
    private volatile Consumer<TraceRecord>[] listenerArray = new Consumer[0];
    private final ArrayDeque<String> errorLog = new ArrayDeque<>();
    private Dialect dialect = Dialect.LINUX_6_1;
    private ProbeParser parser;
    private PrintStream out;
    private KernelProbeRules rules;
    private Consumer<String> kernelLog = line -> { };
    private LongSupplier clock;
    private int nextId = DEFAULT_FIRST_EVENT_ID;
    private boolean anyEventCreated;
    private long recorded, dropped, linesWithoutColumns;

    // ------------------------------------------------------------------ hits recorded natively

    /**
     * A listener that only takes the records in (writes, counts or keeps them) and acts neither on
     * the guest nor on the run: it may be handed a hit's record later in host time than the hit
     * (still before the machine's other code sees the guest), so while every listener is one, the
     * machine's native code may record register-only events' hits ({@link RecordedHit}).
     */
    public interface PassiveListener extends Consumer<TraceRecord> { }

    /**
     * A passive listener that takes the text of the trace: while every listener is one, an event
     * with no trigger and no filter is formatted once, straight into bytes, and handed over as its
     * line ({@link #acceptLine}) with no {@link TraceRecord} made; other events still come as
     * records ({@link #accept}).
     */
    public interface LineListener extends PassiveListener {
        /** The event's {@code trace} line (no newline): valid during the call only. */
        void acceptLine(LineBytes line);

        /** As {@link #acceptLine(LineBytes)}, of a line that is {@code line[offset, offset + length)}. */
        default void acceptLine(byte[] line, int offset, int length) {
            acceptLine(new LineBytes(length).bytes(line, offset, length));
        }

        /** As {@link #acceptLine(LineBytes)}, of a line that is {@code head} followed by {@code line[offset, offset + length)}. */
        default void acceptLine(byte[] head, byte[] line, int offset, int length) {
            acceptLine(new LineBytes(head.length + length).bytes(head, 0, head.length).bytes(line, offset, length));
        }

        /** Several lines, each followed by its newline: {@code text[offset, offset + length)}; by default each through {@link #acceptLine(byte[], int, int)}. */
        default void acceptLines(byte[] text, int offset, int length) {
            int end = offset + length;
            for (int i = offset, start = offset; i < end; i++) {
                if (text[i] != '\n') continue;
                acceptLine(text, start, i - start);
                start = i + 1;
            }
        }
    }

    /**
     * {@link #listenerArray} as line listeners while every listener is one (events without
     * triggers or filter are then handed over as lines), else null. An array of that type: no cast
     * per hit (an interface cast is a slow subtype check under the client compiler).
     */
    private volatile LineListener[] lineListeners = new LineListener[0];
    /** The line of an event handed over as one (the emulating thread's). */
    private final LineBytes line = new LineBytes(256);
    /** The context columns of the last line handed over, and what made them (most hits come from the task, CPU and state of the hit before). */
    private byte[] lineColumns, lineStateColumns;
    private String lineComm, lineLatency;
    private int linePid = -1, lineCpu = -1;
    /**
     * The context columns of recent recorded hits handed over as lines (null: none), and what
     * each was made from: the hit's captured words ({@link RecordedHit#copyWords}), its interrupt
     * state, CPU, path and ftrace_ops count. A few entries: a job's hits alternate between a few
     * tasks and states (interrupts, softirqs, preemption levels).
     */
    private static final int CONTEXTS = 32;
    private final byte[][] contextColumns = new byte[CONTEXTS][];
    /** Each context's columns after the task's ({@link #lineStateColumns}): what the native code is told. */
    private final byte[][] contextStateColumns = new byte[CONTEXTS][];
    private final long[][] contextKeys = new long[CONTEXTS][];
    private final boolean[] contextIrqsOff = new boolean[CONTEXTS];
    private final int[] contextCpu = new int[CONTEXTS], contextOps = new int[CONTEXTS];
    private final LatencyPaths.Path[] contextPath = new LatencyPaths.Path[CONTEXTS];
    /** The native code's line generation each context was last told in ({@link #toldColumns}; -1: not told). */
    private final long[] contextTold = new long[CONTEXTS];
    /** Each context's line class ({@link #lineClass} of its path and ftrace_ops count). */
    private final int[] contextClass = new int[CONTEXTS];
    private int lastContext, nextContext;

    /** The guest words a recorded hit captures (word 0 the current task), or null: none recorded. */
    private RecordedProbeHits.Word[] recordedWords;
    private TaskLayout task;
    private boolean defaultClock = true;

    /** Whether hits may be recorded natively: the words known, the machine's clock, every listener passive. */
    private boolean recordingAllowed() {
        if (recordedWords == null || !defaultClock) return false;
        for (Consumer<TraceRecord> l : listenerArray) if (!(l instanceof PassiveListener)) return false;
        return true;
    }

    /** The words a recorded hit captures, from the task layout and the latency layout, told to the engine. */
    private void updateRecordedWords() {
        RecordedProbeHits.Word[] w = null;
        int spEl0 = arch == Arch.ARM64 ? kprobes.recordedRegister("sp_el0") : -1;
        if (task != null && (arch == Arch.X86_64 || spEl0 >= 0)) {
            List<RecordedProbeHits.Word> l = new ArrayList<>();
            // word 0 the current task: x86-64 the per-CPU current_task, arm64 SP_EL0 (MachineFetchContext.currentTask)
            if (arch == Arch.X86_64) {
                l.add(new RecordedProbeHits.Word(task.gsRelative() ? RecordedProbeHits.Base.GS_BASE : RecordedProbeHits.Base.ABSOLUTE,
                        task.gsOffset(), 8));
            } else {
                l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.REGISTER, spEl0, 8));
            }
            l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.TASK, task.pidOffset(), 4));
            l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.TASK, task.commOffset(), TaskLayout.COMM_LEN));
            // the task, its pid and its comm first: the native code writes a line's task columns from them (RecordedProbeHits.TASK_WORDS)
            if (latency != null) l.addAll(latency.recordedWords());
            w = l.toArray(new RecordedProbeHits.Word[0]);
        }
        java.util.Arrays.fill(contextColumns, null);
        recordedWords = w;
        kprobes.recordHitsWith(w);
    }

    private EventEngine(Kprobes kprobes, KernelSymbols symbols, TaskLayout task, PrintStream out) {
        this.kprobes = Objects.requireNonNull(kprobes);
        this.machine = kprobes.machine();
        this.arch = machine.arch();
        this.symbols = Objects.requireNonNull(symbols);
        this.formatter = new TraceFormatter(symbols, address -> address == kprobes.trampolineAddress());
        this.ctx = new MachineFetchContext(machine, kprobes.regs(), symbols, task);
        ctx.emptyUserStringFaults(dialect.emptyUserStringFaults());
        if (task != null) kprobes.currentTask(ctx::currentTaskNow);
        this.parser = new ProbeParser(arch, dialect, symbols);
        this.out = out;
        this.clock = machine.clock()::liveNanos;
        this.task = task;
        updateRecordedWords();
    }

    /**
     * The kprobe-event subsystem on {@code kprobes}' machine.
     *
     * @param symbols the guest kernel's kallsyms (parsing, {@code @SYM}, {@code %pS} printing)
     * @param task    where the current task is (null: comm and pid unknown)
     * @param out     where trace lines go, one per event (null: nowhere, listeners only)
     */
    public static EventEngine attach(Kprobes kprobes, KernelSymbols symbols, TaskLayout task, PrintStream out) {
        return new EventEngine(kprobes, symbols, task, out);
    }

    /** As {@link #attach(Kprobes, KernelSymbols, TaskLayout, PrintStream)} with the layout from the kernel's BTF. */
    public static EventEngine attach(Kprobes kprobes, KernelSymbols symbols, KernelStructs structs, PrintStream out) {
        EventEngine e = new EventEngine(kprobes, symbols, structs == null ? null : TaskLayout.of(structs), out);
        e.structs = structs;
        e.latency = structs == null ? null : LatencyLayout.of(structs, symbols, e.dialect.hasGenericTifBits());
        e.updateRecordedWords();
        return e;
    }

    /** Trace lines to standard output. */
    public static EventEngine attach(Kprobes kprobes, KernelSymbols symbols, TaskLayout task) {
        return attach(kprobes, symbols, task, System.out);
    }

    // ------------------------------------------------------------------ options

    /** Which kernel's parser to imitate (Linux 6.1 by default). */
    public EventEngine dialect(Dialect d) {
        this.dialect = Objects.requireNonNull(d);
        this.parser = new ProbeParser(arch, d, symbols);
        ctx.emptyUserStringFaults(d.emptyUserStringFaults());
        if (structs != null) latency = LatencyLayout.of(structs, symbols, d.hasGenericTifBits());
        updateRecordedWords();
        return this;
    }

    /** Where trace lines go (null: nowhere). */
    /**
     * The kernel's rules trace_kprobe applies before registering (notrace functions); the engine's
     * own {@link Kprobes#rules} cover the rest. {@code kernelLog} gets what the kernel prints about
     * a refusal ({@code trace_kprobe: Could not probe notrace function ...}).
     */
    public EventEngine rules(KernelProbeRules rules, Consumer<String> kernelLog) {
        this.rules = rules;
        this.kernelLog = kernelLog;
        return this;
    }

    public EventEngine output(PrintStream out) {
        this.out = out;
        kprobes.recordedHitsChanged();
        return this;
    }

    /** Receives every recorded event (after it was printed). */
    public EventEngine addListener(Consumer<TraceRecord> listener) {
        listeners.add(Objects.requireNonNull(listener));
        listenersChanged();
        return this;
    }

    public EventEngine removeListener(Consumer<TraceRecord> listener) {
        listeners.remove(listener);
        listenersChanged();
        return this;
    }

    @SuppressWarnings("unchecked")
    private void listenersChanged() {
        listenerArray = listeners.toArray(new Consumer[0]);
        boolean lines = true;
        for (Consumer<TraceRecord> l : listenerArray) lines &= l instanceof LineListener;
        lineListeners = lines ? java.util.Arrays.copyOf(listenerArray, listenerArray.length, LineListener[].class) : null;
        kprobes.recordedHitsChanged();
    }

    /** The id given to the first event; only before any event is created. */
    public EventEngine firstEventId(int id) {
        if (anyEventCreated) throw new IllegalStateException("events were already created");
        if (id <= 0 || id > 0xffff) throw new IllegalArgumentException("event id " + id);
        this.nextId = id;
        return this;
    }

    /** Takes {@code n} trace-event ids for another subsystem's events (uprobe events share the kernel's id space); returns the first. */
    public int takeEventIds(int n) {
        anyEventCreated = true;
        int first = nextId;
        nextId += n;
        return first;
    }

    /** Declares an event of another subsystem (a tracepoint, a uprobe): creating a kprobe event of that name gives EVENT_EXIST. */
    public EventEngine foreignEvent(String group, String event) {
        foreignEvents.add(group + "/" + event);
        return this;
    }

    /** The timestamp source, in nanoseconds (default: the machine's guest time). */
    public EventEngine clock(LongSupplier nanos) {
        this.clock = Objects.requireNonNull(nanos);
        defaultClock = false;
        kprobes.recordedHitsChanged();
        return this;
    }

    public Kprobes kprobes() { return kprobes; }

    public Arch arch() { return arch; }

    public ProbeParser parser() { return parser; }

    // ------------------------------------------------------------------ kprobe_events

    /**
     * Writes {@code text} to {@code kprobe_events} (opened for append): one command per line,
     * {@code #} comments and blank lines ignored. Like the kernel, stops at the first rejected
     * line (earlier lines stay in effect).
     *
     * @throws ProbeSyntaxException what the write fails with; logged entries are also in {@link #errorLog()}
     */
    public void write(String text) throws ProbeSyntaxException {
        for (String line : text.split("\n", -1)) writeLine(line);
    }

    /** Writes all {@code lines}, stopping at the first rejected one. */
    public void writeAll(List<String> lines) throws ProbeSyntaxException {
        for (String l : lines) write(l);
    }

    /**
     * Boot-time probes, as the kernel's {@code kprobe_event=} with {@code trace_event=} naming
     * them: writes every definition (stopping at the first rejected one) and enables each event
     * the definitions created or appended to. What {@code ./kpemu boot -e DEF --events-file F} does.
     *
     * @return the events enabled, as {@code GROUP/EVENT}
     */
    public List<String> writeAndEnable(List<String> definitions) throws ProbeSyntaxException {
        java.util.SequencedSet<String> touched = new java.util.LinkedHashSet<>();   // in first-write order
        for (String text : definitions) {
            for (String line : text.split("\n", -1)) {
                ProbeDefinition d;
                try {
                    d = parser.parse(line);
                } catch (ProbeSyntaxException e) {
                    throw log(e);
                }
                writeLine(line);
                if (d instanceof TraceProbe p) {
                    String key = p.group() + "/" + p.event();
                    if (events.containsKey(key)) touched.add(key);
                }
            }
        }
        touched.removeIf(key -> !events.containsKey(key));   // defined, then deleted by a later "-:EVENT"
        for (String key : touched) setEnabled(events.get(key), true);
        return List.copyOf(touched);
    }

    private void writeLine(String line) throws ProbeSyntaxException {
        ProbeDefinition d;
        try {
            d = parser.parse(line);
            if (d == null) return;
            switch (d) {
                case DeleteDef del -> delete(del);
                case TraceProbe p -> create(p);
            }
        } catch (ProbeSyntaxException e) {
            throw log(e);
        }
    }

    /** Opening {@code kprobe_events} with O_TRUNC: deletes every kprobe event, or nothing (EBUSY) when one is enabled. */
    public void truncate() throws ProbeSyntaxException {
        for (Event e : events.values())
            if (e.enabled) throw ProbeSyntaxException.silent("", Errno.EBUSY, "event " + e.key() + " is enabled");
        for (Probe p : new ArrayList<>(probes)) release(p);
    }

    /** Reading {@code kprobe_events}: one line per probe ({@code trace_kprobe_show}). */
    public String listing() {
        StringBuilder sb = new StringBuilder();
        java.util.Set<TraceProbe> listed = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        int defaultMaxactive = kprobes.defaultMaxactive();        // max(10, 2 x the machine's vCPUs)
        for (Probe p : probes) if (listed.add(p.def)) sb.append(TraceFormatter.listing(p.def, defaultMaxactive)).append('\n');   // a glob fprobe: one line
        return sb.toString();
    }

    private ProbeSyntaxException log(ProbeSyntaxException e) {
        if (e.logged()) {
            errorLog.addLast(e.errorLog(clock.getAsLong()));
            while (errorLog.size() > ERROR_LOG_MAX) errorLog.removeFirst();
        }
        return e;
    }

    /** Reading {@code error_log}: the last {@link #ERROR_LOG_MAX} entries, oldest first. */
    public String errorLog() { return String.join("", errorLog); }

    /** Writing to {@code error_log} with O_TRUNC clears it. */
    public void clearErrorLog() { errorLog.clear(); }

    // ------------------------------------------------------------------ create (register_trace_kprobe)

    private void create(TraceProbe def) throws ProbeSyntaxException {
        String cmd = def.command();
        Event ev = events.get(def.group() + "/" + def.event());
        if (ev != null && (def instanceof WprobeDef || ev.probes.getFirst().def instanceof WprobeDef)) {
            // register_trace_wprobe_event: a wprobe event has one probe
            throw ProbeSyntaxException.registration(cmd, 0, 0, KernelError.EVENT_EXIST, Errno.EEXIST).from(WprobeDef.SUBSYSTEM);
        }
        if (ev != null) {
            // register_trace_kprobe + append_trace_kprobe
            if (ev.isReturn != def.isReturn())
                throw ProbeSyntaxException.registration(cmd, 0, 0, KernelError.DIFF_PROBE_TYPE, Errno.EEXIST);
            int diff = compareArgTypes(def, ev.probes.getFirst().def);
            if (diff != 0)
                throw ProbeSyntaxException.registration(cmd, diff + 1, 0, KernelError.DIFF_ARG_TYPE, Errno.EEXIST);
            if (hasSameProbe(ev, def))
                throw ProbeSyntaxException.registration(cmd, 0, 0, KernelError.SAME_PROBE, Errno.EEXIST);
        } else if (foreignEvents.contains(def.group() + "/" + def.event())) {
            throw ProbeSyntaxException.registration(cmd, 0, 0, KernelError.EVENT_EXIST, Errno.EEXIST);
        }
        CompiledProbe compiled = CompiledProbe.compile(def, arch, symbols); // traceprobe_update_arg: @SYM
        // an fprobe's filter may match many functions (register_fprobe's glob): a probe on each
        List<String> functions = def instanceof FprobeDef f && isGlob(f.symbol()) ? ftraceFunctions(f.symbol()) : null;
        if (functions != null && functions.isEmpty())
            throw ProbeSyntaxException.silent(cmd, Errno.EOPNOTSUPP, "kpemu knows no function ftrace lists that matches " + ((FprobeDef) def).symbol());
        List<Probe> made = new ArrayList<>();
        boolean enabled = ev != null && ev.armed;
        try {
            for (String function : functions != null ? functions : java.util.Collections.<String>singletonList(null)) {
                Probe p = new Probe(def, compiled);
                p.function = function;
                made.add(p);
                register(p, enabled);
            }
        } catch (IllegalStateException | KprobeException e) {
            for (Probe p : made) unregisterQuietly(p);
            if (e instanceof IllegalStateException)      // a tracepoint kpemu cannot join: its limit, nothing logged
                throw ProbeSyntaxException.silent(cmd, Errno.EOPNOTSUPP, e.getMessage());
            // Linux registers an fprobe on ftrace, which takes any function ftrace lists (checked
            // before boot, KernelProbeSites); a refusal by the kprobe kpemu puts there (the kprobe
            // blacklist, an instruction it cannot step) is kpemu's limit, not a kernel error
            if (def instanceof FprobeDef) throw ProbeSyntaxException.silent(cmd, Errno.EOPNOTSUPP,
                    "kpemu cannot put the probe for this fprobe event there: " + e.getMessage());
            throw registrationError(def, (KprobeException) e);
        }
        if (ev == null) {
            ev = new Event(def.group(), def.event(), def.isReturn(), nextId++);
            anyEventCreated = true;
            events.put(ev.key(), ev);
        }
        for (Probe p : made) {
            p.event = ev;
            ev.probes.add(p);
            probes.add(p);
        }
    }

    private static boolean isGlob(String filter) {
        return filter.chars().anyMatch(c -> c == '*' || c == '?' || c == '[');
    }

    /** The functions ftrace lists (those holding an ftrace site) that {@code filter} matches, in address order. */
    private List<String> ftraceFunctions(String filter) {
        if (rules == null) return List.of();
        var match = KernelProbeSites.ftraceFilter(filter);
        java.util.LinkedHashSet<String> out = new java.util.LinkedHashSet<>();
        for (long site : rules.tables().ftraceSites())
            symbols.symbolAt(site).filter(s -> s.module() == null && match.test(s.name())).ifPresent(s -> out.add(s.name()));
        return List.copyOf(out);
    }

    /** The tracepoints kpemu joined, by name: one hook each, shared by the probes on it (Linux registers the probestub once). */
    private final Map<String, TracepointHook> tracepointHooks = new java.util.HashMap<>();

    /** Drops {@code p}'s use of its tracepoint; the last one leaves the tracepoint as it was. */
    private void releaseHook(Probe p) {
        if (p.hook == null) return;
        if (--p.hook.users == 0) {
            p.hook.detach();
            tracepointHooks.values().remove(p.hook);
        }
        p.hook = null;
    }

    /**
     * Points wprobe {@code p} at {@code address} (0: watches nothing): the range is translated
     * through the guest's page tables now, one watch per physically contiguous piece.
     */
    private void watch(Probe p, long address) {
        WprobeDef w = (WprobeDef) p.def;
        if (p.watch != null) {
            p.watch.remove();
            p.watch = null;
        }
        p.watchAddress = address;
        p.registered = true;
        if (address == 0) return;
        try {
            p.watch = WatchedRange.install(machine, address, w.length(), w.reads(), w.writes(), arch == Arch.X86_64,
                    (hit, va) -> p.onWatch(hit));
        } catch (IllegalArgumentException e) {
            p.registered = false;
            throw new IllegalStateException("kpemu cannot watch " + w.access() + "@0x"       // create(): one line, EOPNOTSUPP
                    + Long.toHexString(address) + ":" + w.length() + ": " + e.getMessage());
        }
    }

    /** The ip rule of wprobe records ({@link Probe#onWatch}). */
    private HardwareWatchIp watchIp;

    private long reportedWatchIp(long pc) {
        if (watchIp == null) watchIp = new HardwareWatchIp(machine);
        return watchIp.of(pc);
    }

    /** Undoes {@link #register} for a probe of a definition that failed as a whole. */
    private void unregisterQuietly(Probe p) {
        if (p.watch != null) {
            p.watch.remove();
            p.watch = null;
        }
        if (p.registered) {
            kprobes.unregister(p.engineProbe);
            p.registered = false;
        }
        releaseHook(p);
    }

    /** {@code __register_trace_kprobe}. A module symbol whose module is not loaded stays unregistered, as in the kernel. */
    private void register(Probe p, boolean enabled) {
        TraceProbe def = p.def;
        if (def instanceof WprobeDef w) {
            watch(p, w.address());
            return;
        }
        if (def instanceof FprobeDef) anyFprobe = true;
        if (def.isReturn()) {
            Kretprobe rp = p.function != null ? Kretprobe.at(p.function) : switch (def.target()) {
                case ProbeTarget.SymbolTarget s -> Kretprobe.at(s.qualifiedName(), s.offset());
                case ProbeTarget.AddressTarget a -> Kretprobe.at(a.address());
                case ProbeTarget.FileTarget f -> throw new IllegalArgumentException("a uprobe in the kprobe engine: " + def.command());
            };
            rp.maxactive(def instanceof KretprobeDef r ? r.maxactive() : def instanceof FprobeDef f ? f.maxactive() : 0).handler(p::onReturn)
                    .recordedReturns(p);
            int saved = p.compiled.entryArgs().length;
            if (saved > 0) {              // trace_kprobe_entry_handler: $argN of a return probe, saved at entry
                rp.dataSize(8 * saved).entryHandler((ri, regs) -> {
                    ctx.begin(regs);
                    p.compiled.storeEntryArgs(ctx, ri.data());
                    return 0;
                });
            }
            if (!enabled) rp.kprobe().disabled();
            p.engineProbe = rp;
        } else {
            if (def instanceof FprobeDef f && f.tracepoint()) {
                // the tracepoint calls its probestub once kpemu joined its probe list (a tracepoint
                // the kernel lacks is kept for a module, as Linux keeps it: it never fires)
                p.hook = tracepointHooks.get(f.symbol());
                if (p.hook != null && !dialect.tracepointTakesManyProbes()) {
                    p.hook = null;
                    throw new IllegalStateException("Linux " + dialect.label() + " refuses a second probe event on tracepoint "
                            + f.symbol() + " (its answer is not recorded)");
                }
                if (p.hook == null) {
                    p.hook = TracepointHook.attach(kprobes, symbols, arch, f.symbol());
                    if (p.hook != null) tracepointHooks.put(f.symbol(), p.hook);
                }
                if (p.hook != null) p.hook.users++;
                if (p.hook == null) {
                    p.registered = false;
                    return;
                }
            }
            Kprobe kp = def instanceof FprobeDef f ? fentry(f.tracepoint() ? FprobeDef.probestub(f.symbol()) : p.function != null ? p.function : f.symbol(), p) : switch (def.target()) {
                case ProbeTarget.SymbolTarget s -> Kprobe.at(s.qualifiedName(), s.offset());
                case ProbeTarget.AddressTarget a -> Kprobe.at(a.address());
                case ProbeTarget.FileTarget f -> throw new IllegalArgumentException("a uprobe in the kprobe engine: " + def.command());
            };
            kp.pre(p::onEntry);
            kp.recordedHits(p);
            if (!p.compiled.readsMemory()) kp.readsNoMemory();
            if (!enabled) kp.disabled();
            if (def instanceof FprobeDef && dialect.fprobesInRegistrationOrder()) kp.runsAfterOlder();
            p.engineProbe = kp;
        }
        try {
            refuseNotrace(def);
            kprobes.register(p.engineProbe);
            p.registered = true;
        } catch (KprobeException e) {
            releaseHook(p);
            if (e.errno() == Errno.ENOENT && (def.target() instanceof ProbeTarget.AddressTarget
                    || def.target() instanceof ProbeTarget.SymbolTarget s && s.module() != null)) {
                // the kernel keeps it unregistered, for a module that may come
                kernelLog.accept(KernelProbeSites.DEFERRED_MESSAGE);
                p.registered = false;
                return;
            }
            throw e;
        }
    }

    /**
     * An fprobe's entry: ftrace calls it from the function's ftrace site (the {@code call
     * __fentry__} on x86, after an {@code endbr64} when the function has one; the patched
     * {@code bl} on arm64), and the event's ip is that site (recorded: {@code (vfs_read+0x4/...)},
     * {@code (do_sys_openat2+0x0/...)} on x86's 6.12, {@code (do_sys_openat2+0x4/...)} on arm64's
     * 7.2). On x86 kpemu probes that site (a kprobe on ftrace, whose registers hold the function's
     * arguments); arm64's kprobes cannot probe an ftrace site, so there it probes the function's
     * entry (the arguments are in the same registers) and the event reports the site.
     */
    private Kprobe fentry(String function, Probe p) {
        if (rules != null) {
            OptionalLong start = symbols.lookupName(function);
            if (start.isPresent()) {
                long size = symbols.symbolAt(start.getAsLong()).map(KernelSymbols.Symbol::size).orElse(0L);
                Long site = rules.tables().ftraceSites().ceiling(start.getAsLong());
                if (site != null && Long.compareUnsigned(site - start.getAsLong(), size) < 0) {
                    if (arch == Arch.X86_64) return Kprobe.at(site);
                    p.reportedIp = site;
                }
            }
        }
        return Kprobe.at(function, 0);
    }

    /** trace_kprobe's {@code within_notrace_func} check (skipped when the engine allows unsafe probes). */
    private void refuseNotrace(TraceProbe def) {
        if (rules == null || kprobes.allowsUnsafe()) return;
        KernelProbeSites.Target t = KernelProbeSites.target(def, symbols::lookupName);
        if (t == null) return;   // register_kprobe reports it (ENOENT) or defers it (a module)
        long address = t.address();
        String name = !dialect.hasBtfArgs() ? t.name()
                : symbols.symbolAt(address).map(KernelSymbols.Symbol::name).orElse(String.format("0x%x", address));
        if (rules.withinNotraceFunction(address)) {
            kernelLog.accept(KernelProbeSites.notraceMessage(name));
            throw new KprobeException(Errno.EINVAL, "notrace function " + name);
        }
    }

    /** The error {@code __trace_kprobe_create} logs for a failed registration (index 1, offset 0). */
    static ProbeSyntaxException registrationError(TraceProbe def, KprobeException e) {
        String cmd = def.command();
        return switch (e.errno()) {
            case EILSEQ -> ProbeSyntaxException.registration(cmd, 1, 0, KernelError.BAD_INSN_BNDRY, Errno.EILSEQ);
            case ENOENT -> ProbeSyntaxException.registration(cmd, 1, 0, KernelError.BAD_PROBE_ADDR, Errno.ENOENT);
            case ENOMEM, EEXIST -> ProbeSyntaxException.silent(cmd, e.errno(), e.getMessage());
            default -> ProbeSyntaxException.registration(cmd, 1, 0, KernelError.FAIL_REG_PROBE, e.errno());
        };
    }

    /** {@code trace_probe_compare_arg_type}: 0 when equal, else the 1-based index of the first differing argument. */
    static int compareArgTypes(TraceProbe a, TraceProbe b) {
        int na = a.args().size(), nb = b.args().size();
        if (na < nb) return na + 1;
        if (na > nb) return nb + 1;
        for (int i = 0; i < na; i++) {
            FetchArg x = a.args().get(i), y = b.args().get(i);
            if (x.type() != y.type() || x.arrayLength() != y.arrayLength() || !x.name().equals(y.name())) return i + 1;
        }
        return 0;
    }

    /**
     * {@code trace_kprobe_has_same_kprobe}: a probe of the event with the same symbol and offset
     * and the same argument expressions. As in the kernel, address probes all compare as symbol
     * {@code "unknown"} offset 0, so two address probes with the same arguments are "the same".
     */
    private static boolean hasSameProbe(Event ev, TraceProbe comp) {
        for (Probe p : ev.probes) {
            if (!symbolOf(p.def).equals(symbolOf(comp)) || offsetOf(p.def) != offsetOf(comp)) continue;
            boolean same = true;
            for (int i = 0; i < p.def.args().size(); i++) {
                if (!p.def.args().get(i).expression().equals(comp.args().get(i).expression())) {
                    same = false;
                    break;
                }
            }
            if (same) return true;
        }
        return false;
    }

    private static String symbolOf(TraceProbe p) {
        return p.target() instanceof ProbeTarget.SymbolTarget s ? s.qualifiedName() : "unknown";
    }

    private static long offsetOf(TraceProbe p) {
        return p.target() instanceof ProbeTarget.SymbolTarget s ? s.offset() : 0;
    }

    // ------------------------------------------------------------------ delete (dyn_event_release)

    private void delete(DeleteDef del) throws ProbeSyntaxException {
        Errno ret = Errno.ENOENT;
        for (Probe p : new ArrayList<>(probes)) {
            if (!del.matches(p.def)) continue;
            ret = release(p);
            if (ret != null) break;
        }
        if (ret != null) throw ProbeSyntaxException.silent(del.command(), ret,
                ret == Errno.ENOENT ? "no such event" : "the event is enabled");
    }

    /** {@code unregister_trace_kprobe}: null on success, EBUSY for the last probe of an enabled event. */
    private Errno release(Probe p) {
        Event ev = p.event;
        if (ev.probes.size() == 1 && (ev.enabled || ev.hasTriggers())) return Errno.EBUSY;
        if (p.watch != null) {
            p.watch.remove();
            p.watch = null;
        }
        if (p.registered && p.engineProbe != null) {
            kprobes.unregister(p.engineProbe);
            p.registered = false;
        }
        releaseHook(p);
        ev.probes.remove(p);
        probes.remove(p);
        if (ev.probes.isEmpty()) events.remove(ev.key());
        return null;
    }

    /**
     * {@code trace_kprobe_module_callback(MODULE_STATE_COMING)}: every probe on {@code module}'s
     * symbols (defined before it loaded, so left unregistered) is registered now, enabled when
     * its event is. A probe the module does not allow is reported on the kernel log, as the
     * kernel warns, and stays unregistered.
     */
    public void moduleLoaded(String module) {
        for (Probe p : probes) {
            if (!(p.def.target() instanceof ProbeTarget.SymbolTarget s) || !module.equals(s.module())) continue;
            if (p.registered) {
                kprobes.unregister(p.engineProbe);
                p.registered = false;
            }
            try {
                register(p, p.event.enabled);
            } catch (KprobeException e) {
                kernelLog.accept("trace_kprobe: Failed to re-register probe " + p.event.name + " on " + module + ": -" + e.errno().value());
            }
        }
    }

    /**
     * {@code MODULE_STATE_GOING}: the module's probes are unregistered (their text is about to be
     * freed); they stay defined and come back if the module loads again.
     */
    public void moduleGoing(String module) {
        for (Probe p : probes) {
            if (!p.registered || !(p.def.target() instanceof ProbeTarget.SymbolTarget s) || !module.equals(s.module())) continue;
            kprobes.unregister(p.engineProbe);
            p.registered = false;
        }
    }

    // ------------------------------------------------------------------ events/GRP/EVENT

    /** Every event as {@code GROUP/EVENT}, in creation order. */
    public List<String> events() { return List.copyOf(events.keySet()); }

    private Event event(String name) {
        Event e = events.get(name);
        if (e != null) return e;
        if (name.indexOf('/') < 0) {
            for (Event x : events.values()) if (x.name.equals(name)) return x;
        }
        throw new IllegalArgumentException("no kprobe event " + name);
    }

    /** Whether {@code name} ({@code GROUP/EVENT} or {@code EVENT}) exists. */
    public boolean hasEvent(String name) {
        try {
            event(name);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** {@code echo 1 > events/GROUP/EVENT/enable} ({@code name} may omit the group). */
    public void enable(String name) { setEnabled(event(name), true); }

    /** {@code echo 0 > events/GROUP/EVENT/enable}. */
    public void disable(String name) { setEnabled(event(name), false); }

    /** {@code echo 1 > events/kprobes/enable} for every group. */
    public void enableAll() { for (Event e : events.values()) setEnabled(e, true); }

    public void disableAll() { for (Event e : events.values()) setEnabled(e, false); }

    // ------------------------------------------------------------------ filter, trigger, hist

    /**
     * {@code echo EXPR > events/GROUP/EVENT/filter}: only records that pass go to the trace
     * (triggers see every record, as in the kernel). {@code "0"} or an empty text clears it.
     *
     * @throws FilterParseException what the kernel refuses the filter with (the event keeps no filter)
     */
    public void setFilter(String name, String expr) throws FilterParseException {
        Event e = event(name);
        String t = expr.strip();
        kprobes.recordedHitsChanged();   // recorded lines are passed on as text only while no filter holds them back
        if (t.isEmpty() || t.equals("0")) {
            e.filter = null;
            return;
        }
        e.filter = null;
        e.filter = EventFilter.parse(t, fields(e), dialect.filters());
    }

    /** The event's filter as written, or null. */
    public String filter(String name) {
        EventFilter f = event(name).filter;
        return f == null ? null : f.text();
    }

    /**
     * {@code echo 'hist:...' >> events/GROUP/EVENT/trigger}: adds a hist trigger; the event's probes
     * fire from now on even while the event is disabled (the kernel's soft mode), feeding the
     * trigger without writing to the trace.
     *
     * @throws HistTriggerException the trigger is refused
     */
    public void addTrigger(String name, String text) throws HistTriggerException {
        Event e = event(name);
        if (WprobeTrigger.isOne(text)) {
            WprobeTrigger t = WprobeTrigger.parse(text, e.probes.getFirst().def, dialect.filters());
            Event target = events.get(WprobeDef.GROUP + "/" + t.wprobe());
            if (target == null || !(target.probes.getFirst().def instanceof WprobeDef))
                throw new HistTriggerException("No such file or directory: no wprobe event " + WprobeDef.GROUP + "/" + t.wprobe());
            e.wprobeTriggers.add(t);
            setEnabled(target, true);          // the trigger holds the wprobe event (Linux: its soft mode)
            updateArmed(e);
            return;
        }
        e.triggers.add(HistTrigger.parse(text, fields(e), symbols, dialect));
        updateArmed(e);
    }

    /** {@code events/GROUP/EVENT/trigger}: one line per trigger. */
    public String triggers(String name) {
        StringBuilder sb = new StringBuilder();
        for (HistTrigger t : event(name).triggers) sb.append(t.triggerInfo()).append('\n');
        return sb.toString();
    }

    /** {@code events/GROUP/EVENT/hist}: every hist trigger's histogram (empty without one). */
    public String hist(String name) {
        StringBuilder sb = new StringBuilder();
        List<HistTrigger> l = event(name).triggers;
        for (int i = 0; i < l.size(); i++) sb.append(l.get(i).show(i));
        return sb.toString();
    }

    private static EventFields fields(Event e) { return EventFields.of(e.probes.getFirst().def); }

    /** {@code events/GROUP/enable} (the events of one group). */
    public void enableGroup(String group, boolean on) {
        for (Event e : events.values()) if (e.group.equals(group)) setEnabled(e, on);
    }

    public boolean isEnabled(String name) { return event(name).enabled; }

    private void setEnabled(Event e, boolean on) {
        e.enabled = on;
        updateArmed(e);
    }

    /** Enables the event's probes in the engine while it is enabled or has triggers (the kernel's soft mode), disables them otherwise. */
    private void updateArmed(Event e) {
        kprobes.recordedHitsChanged();     // whether its probes' hits may be recorded natively
        boolean on = e.enabled || e.hasTriggers();
        if (e.armed == on) return;
        e.armed = on;
        for (Probe p : e.probes) {
            if (!p.registered || p.engineProbe == null) continue;   // a wprobe's watch stays; its hits check armed
            if (on) kprobes.enable(p.engineProbe);
            else kprobes.disable(p.engineProbe);
        }
    }

    /** The event's trace-event id ({@code events/GROUP/EVENT/id}). */
    public int id(String name) { return event(name).id; }

    /** {@code events/GROUP/EVENT/format}. */
    public String format(String name) {
        Event e = event(name);
        return TraceFormatter.formatFile(e.probes.getFirst().compiled, e.id);
    }

    /** Every event's format file, by {@code GROUP/EVENT}. */
    public Map<String, String> formats() {
        Map<String, String> m = new LinkedHashMap<>();
        for (Event e : events.values()) m.put(e.key(), TraceFormatter.formatFile(e.probes.getFirst().compiled, e.id));
        return m;
    }

    // ------------------------------------------------------------------ kprobe_profile

    /** A line of {@code kprobe_profile}: one per probe (a multiprobe event has several). */
    public record ProfileEntry(String event, long hits, long misses) {
        public String line() { return TraceFormatter.profileLine(event, hits, misses); }
    }

    public List<ProfileEntry> profileEntries() {
        List<ProfileEntry> l = new ArrayList<>(probes.size());
        for (Probe p : probes) l.add(new ProfileEntry(p.event.name, p.nhit, p.misses()));
        return l;
    }

    /** Reading {@code kprobe_profile}. */
    public String profile() {
        StringBuilder sb = new StringBuilder();
        for (ProfileEntry e : profileEntries()) sb.append(e.line()).append('\n');
        return sb.toString();
    }

    /** Sum of the hits of every probe of {@code name}. */
    public long hits(String name) {
        long n = 0;
        for (Probe p : event(name).probes) n += p.nhit;
        return n;
    }

    /** Sum of the misses of every probe of {@code name}. */
    public long misses(String name) {
        long n = 0;
        for (Probe p : event(name).probes) n += p.misses();
        return n;
    }

    /** Events recorded so far. */
    public long recorded() { return recorded; }

    /** Hits whose record exceeded the ring buffer's page and were lost. */
    public long dropped() { return dropped; }

    /**
     * Lines of recorded hits that the native code wrote without their context columns (a state it
     * had not been told yet: {@link #lineFormat}), to which this engine put its own in front.
     */
    public long recordedLinesWithoutColumns() { return linesWithoutColumns; }

    // ------------------------------------------------------------------ records

    /** The latency column when the kernel's state for it cannot be read: only the irqs-off flag ({@link TraceContext#latency}). */
    private static final String IRQS_ON = TraceContext.latency(false, false, false, false, false, false, false, 0, 0),
            IRQS_OFF = TraceContext.latency(true, false, false, false, false, false, false, 0, 0);

    /**
     * A record's line, formatted when read: a class rather than a capturing lambda, which the
     * client compiler allocates through {@code Unsafe.allocateInstance} on every hit.
     */
    private record ArgsText(TraceFormatter formatter, String head, CompiledProbe cp, byte[] data) implements TraceRecord.BodyText {
        @Override public String get() {
            return appendTo(new LineBytes(head.length() + 64)).toText();
        }

        @Override public LineBytes appendTo(LineBytes b) {
            return formatter.appendArgs(b.text(head), cp, data);
        }
    }

    /** A record's line formatted at the hit. */
    private record FixedText(String text) implements java.util.function.Supplier<String> {
        @Override public String get() { return text; }
    }

    /**
     * One hit's record: the context columns (the latency column as Linux's path {@code path} would
     * print it, {@link LatencyFlags}) and the fetched argument area {@code data} (the kernel's trace
     * entry); its text is formatted when a reader asks for it, not here.
     */
    private void emit(Probe p, boolean isReturn, long ip, long retIp, CompiledProbe.FetchBuffer fetched, LatencyPaths.Path path) {
        emit(p, isReturn, ip, retIp, fetched, path, Long.MIN_VALUE);
    }

    /** As above, at guest time {@code nanos} (a recorded hit's; {@code Long.MIN_VALUE}: now, by the engine's clock). */
    private void emit(Probe p, boolean isReturn, long ip, long retIp, CompiledProbe.FetchBuffer fetched, LatencyPaths.Path path, long nanos) {
        emit(p, isReturn, ip, retIp, fetched, path, nanos, null);
    }

    /** As above; {@code hit} the recorded hit this is (null: a live one), whose words may give a recent recorded hit's context columns again ({@link #recordedColumns}). */
    private void emit(Probe p, boolean isReturn, long ip, long retIp, CompiledProbe.FetchBuffer fetched, LatencyPaths.Path path, long nanos,
            RecordedHit hit) {
        CompiledProbe cp = p.compiled;
        Event e = p.event;
        LineListener[] lineTakers = lineListeners;
        if (lineTakers != null && takesLine(e)) {
            recorded++;
            if (lineTakers.length == 0 && out == null) return;      // counted only: no line to make
            int cpu = machine.cpu(), ops = ftraceOps(p, path);
            byte[] columns;
            if (hit == null) columns = lineColumns(cpu, path, ops);
            else columns = recordedColumns(hit, cpu, path, ops);
            long at = nanos != Long.MIN_VALUE ? nanos : clock.getAsLong();
            LineBytes b = line.clear();
            appendTimestamp(b.bytes(columns), at);
            formatter.appendArgs(b.bytes(p.headBytes(isReturn, ip, retIp)), cp, fetched.data, fetched.end);   // formatted now: no copy of the values
            PrintStream o = out;
            if (o != null) {
                o.write(b.array(), 0, b.length());
                o.write('\n');
            }
            for (LineListener l : lineTakers) l.acceptLine(b);
            return;
        }
        int pid = ctx.pid();
        String comm = commColumn(pid), lat = latencyColumn(path, ftraceOps(p, path));
        long at = nanos != Long.MIN_VALUE ? nanos : clock.getAsLong();
        byte[] data = fetched.bytes();
        TraceContext c = new TraceContext(comm, pid, machine.cpu(), lat, at);
        String head = p.head(isReturn, ip, retIp);
        java.util.function.Supplier<String> body = new ArgsText(formatter, head, cp, data);
        if (cp.printsSymbols()) body = new FixedText(body.get());   // symbol-typed values: resolved now, as the head
        TraceRecord r = new TraceRecord(p.event.group, p.event.name, c, isReturn, ip, retIp, p.event.id,
                new DecodedArgs(formatter, cp, data), body);
        // __event_trigger_test_discard: the triggers first, then soft-disabled and filtered records are discarded
        // indexed loops: under the client compiler an iterator is an object per hit
        List<WprobeTrigger> wprobeTriggers = p.event.wprobeTriggers;
        for (int i = 0; i < wprobeTriggers.size(); i++) fire(wprobeTriggers.get(i), r);
        List<HistTrigger> triggers = p.event.triggers;
        for (int i = 0; i < triggers.size(); i++) triggers.get(i).accept(r);
        if (!p.event.enabled) return;
        if (p.event.filter != null && !p.event.filter.matches(r)) return;
        recorded++;
        PrintStream o = out;
        if (o != null) {                // the guest's bytes, whatever the stream's charset (GuestText)
            byte[] line = r.lineBytes();
            o.write(line, 0, line.length);
            o.write('\n');
        }
        for (Consumer<TraceRecord> l : listenerArray) l.accept(r);
    }

    /** The guest second of the last line's timestamp, and its first nanosecond (Long.MIN_VALUE: none yet). */
    private long stampSecond, stampStart = Long.MIN_VALUE;

    /**
     * {@link TraceFormatter#appendTimestamp} of a line: within the second of the line before, the
     * microseconds come from an int division (the client compiler divides a long in a runtime call).
     */
    private void appendTimestamp(LineBytes b, long nanos) {
        if (nanos < 0) {
            TraceFormatter.appendTimestamp(b, nanos);
            return;
        }
        long into = nanos - stampStart;
        if (stampStart == Long.MIN_VALUE || into < 0 || into >= 1_000_000_000L) {
            stampSecond = nanos / 1_000_000_000L;
            stampStart = stampSecond * 1_000_000_000L;
            into = nanos - stampStart;
        }
        TraceFormatter.appendTimestamp(b, stampSecond, (int) into / 1000);
    }

    /** The comm column of the current task whose pid is {@code pid}: {@code <...>} when the task is unknown, {@code <idle>} for pid 0. */
    private String commColumn(int pid) {
        if (ctx.currentTask() == 0) return "<...>";
        if (pid == 0) return "<idle>";
        return commString(ctx.comm());
    }

    /** The latency column of an event fired by {@code path} from the hit's state ({@link LatencyLayout#column}; the interrupt state alone when that is unknown). */
    private String latencyColumn(LatencyPaths.Path path, int ftraceOps) {
        String lat = latency == null ? null : latency.column(ctx, machine, path, ftraceOps);
        if (lat != null) return lat;
        return ctx.irqsDisabled() ? IRQS_OFF : IRQS_ON;
    }

    /** The context columns of this hit: the last line's array again when they are the same. */
    private byte[] lineColumns(int cpu, LatencyPaths.Path path, int ops) {
        int pid = ctx.pid();
        String comm = commColumn(pid), lat = latencyColumn(path, ops);
        if (comm != lineComm || pid != linePid || cpu != lineCpu || lat != lineLatency) {
            lineColumns = TraceFormatter.appendContextColumns(new LineBytes(48), comm, pid, null, cpu, lat).toByteArray();
            if (lineStateColumns == null || cpu != lineCpu || lat != lineLatency) lineStateColumns = TraceFormatter.appendStateColumns(new LineBytes(24), cpu, lat).toByteArray();
            lineComm = comm;
            linePid = pid;
            lineCpu = cpu;
            lineLatency = lat;
        }
        return lineColumns;
    }

    /**
     * A recorded hit's line as the native code formatted it ({@link #lineFormat}), handed over as
     * {@link #emit} would hand over the line it makes: only while the event still takes that path
     * (enabled, no filter, no trigger, line listeners only) and the line's time is the hit's.
     * False: not taken, the caller makes the line.
     */
    private boolean emitLine(Probe p, RecordedHit hit) {
        LineListener[] takers = lineListeners;
        Event e = p.event;
        if (takers == null || !takesLine(e)) return false;
        if (hit.lineNanos() != hit.guestNanos()) return false;
        recorded++;
        if (takers.length == 0 && out == null) return true;
        byte[] columns = null;
        if (hit.lineWithoutColumns()) {       // a context the native code was not told yet: the columns as emit makes them
            linesWithoutColumns++;
            ctx.beginRecorded(hit);
            LatencyPaths.Path path = p.def.isReturn() ? returnPath(p) : entryPath(p, hit.regs());
            columns = recordedColumns(hit, machine.cpu(), path, ftraceOps(p, path));
        }
        byte[] a = hit.lineBytes();
        int off = hit.lineOffset(), len = hit.lineLength();
        PrintStream o = out;
        if (o != null) {
            if (columns != null) o.write(columns, 0, columns.length);
            o.write(a, off, len);
            o.write('\n');
        }
        for (LineListener l : takers) {
            if (columns == null) l.acceptLine(a, off, len);
            else l.acceptLine(columns, a, off, len);
        }
        return true;
    }

    /** Complete native lines of several hits, as {@link #emitLine} hands each over ({@link Probe#lineSink}). */
    private final dev.kpemu.kprobes.RecordedLineSink passedLines = (text, offset, length) -> {
        LineListener[] takers = lineListeners;
        if (takers == null) return;
        PrintStream o = out;
        if (o != null) o.write(text, offset, length);
        for (LineListener l : takers) l.acceptLines(text, offset, length);
    };

    /** Whether {@code e}'s records go out as lines while every listener takes lines: enabled, no filter, no trigger. */
    private static boolean takesLine(Event e) {
        return e.enabled && e.filter == null && e.triggers.isEmpty() && e.wprobeTriggers.isEmpty();
    }

    /** The (path, ftrace_ops) pairs of line formats, numbered: the native code keys known contexts by them. */
    private final Map<Long, Integer> lineClasses = new HashMap<>();

    private int lineClass(LatencyPaths.Path path, int ops) {
        Long key = ((long) path.ordinal() << 32) | (ops & 0xffff_ffffL);
        Integer c = lineClasses.get(key);
        if (c == null) lineClasses.put(key, c = lineClasses.size());
        return c;
    }

    /**
     * The format of the line the machine's native code may write for {@code p}'s recorded hits of
     * {@code k} ({@link RecordedHitHandler#lineFormat}; {@code kpemu_probe_hits.h}): only for an
     * entry event that {@link #emit} hands over as a line and whose arguments are registers
     * printed as numbers. The native code writes what {@link #emit} writes: the context columns of
     * a context this engine has formatted before ({@link #recordedColumns} tells it each), the
     * timestamp, the head and the arguments.
     */
    private byte[] lineFormat(Probe p, Kprobe k, RecordedHit layout) {
        LineListener[] takers = lineListeners;
        Event e = p.event;
        if (takers == null || (takers.length == 0 && out == null)) return null;
        if (!e.armed || !takesLine(e)) return null;
        if (p.def.isReturn() || p.def instanceof FprobeDef || !p.recordable()) return null;
        LatencyPaths.Path path = entryPath(p, layout.regs());
        return formatBytes(p, layout, path, p.headBytes(false, p.reportedIp != 0 ? p.reportedIp : k.address(), 0), false);
    }

    /**
     * A line format ({@code kpemu_probe_hits.h} kpemu_hits_format) of {@code p}'s lines fired by
     * {@code path}, with {@code head}; null: none. A return's ({@code atReturn}) prints no ip
     * register natively: the record holds the trampoline's, the handler sees the real return address.
     */
    private byte[] formatBytes(Probe p, RecordedHit layout, LatencyPaths.Path path, byte[] head, boolean atReturn) {
        int ip = atReturn ? layout.registerIndex(layout.regs().ipName()) : -1;
        int[] args = p.compiled.lineArgs(slot -> {
            int i = ctx.recordedIndexOfSlot(layout, slot);
            return i == ip ? -1 : i;
        });
        int[] irq = ctx.recordedIrqFlag(layout);
        if (args == null || irq == null || args.length / 3 > 255) return null;
        int cls = lineClass(path, ftraceOps(p, path));
        if (cls > 0xffff || head.length > 0xffff) return null;
        java.io.ByteArrayOutputStream f = new java.io.ByteArrayOutputStream();
        f.write(cls);
        f.write(cls >>> 8);
        f.write(irq[0]);
        f.write(irq[2]);
        for (int i = 0; i < 4; i++) f.write(irq[1] >>> (8 * i));
        f.write(head.length);
        f.write(head.length >>> 8);
        f.writeBytes(head);
        f.write(args.length / 3);
        for (int i = 0; i < args.length / 3; i++) {
            byte[] prefix = GuestText.encode(" " + p.compiled.arg(i).name() + "=");
            int index = args[3 * i];    // a register's index in the record, or CompiledProbe.LINE_READ + a read's
            if (prefix.length > 255 || index < 0 || index > 255) return null;
            f.write(prefix.length);
            f.writeBytes(prefix);
            f.write(index);
            f.write(args[3 * i + 1]);
            f.write(args[3 * i + 2]);
        }
        return f.toByteArray();
    }

    /**
     * A recorded hit's context columns: those of a recent recorded hit made from the same words,
     * interrupt state, CPU, path and ftrace_ops count — everything the columns are a function of
     * ({@link #contextColumns}) — or else read from its words and kept in place of the oldest.
     */
    private byte[] recordedColumns(RecordedHit hit, int cpu, LatencyPaths.Path path, int ops) {
        boolean irqsOff = ctx.irqsDisabled();
        int last = lastContext;
        if (sameContext(last, hit, irqsOff, cpu, path, ops)) return toldColumns(last, hit);
        for (int i = 0; i < CONTEXTS; i++) {
            if (i != last && sameContext(i, hit, irqsOff, cpu, path, ops)) {
                lastContext = i;
                return toldColumns(i, hit);
            }
        }
        int i = nextContext;
        nextContext = (i + 1) % CONTEXTS;
        lastContext = i;
        contextKeys[i] = hit.copyWords(contextKeys[i]);
        contextIrqsOff[i] = irqsOff;
        contextCpu[i] = cpu;
        contextPath[i] = path;
        contextOps[i] = ops;
        contextColumns[i] = lineColumns(cpu, path, ops);
        contextStateColumns[i] = lineStateColumns;
        contextClass[i] = lineClass(path, ops);
        contextTold[i] = -1;   // not told yet (generations count from 1)
        return toldColumns(i, hit);
    }

    /**
     * Context {@code i}'s columns; when the native code wrote {@code hit}'s line without them, told
     * to it first (its context {@code i}) unless told since it last forgot: it then writes the
     * columns of later hits in that state itself, of any task ({@link #lineFormat}; the words begin
     * with the task's three, {@link #updateRecordedWords}, whose columns the native code writes).
     */
    private byte[] toldColumns(int i, RecordedHit hit) {
        if (hit.lineWithoutColumns() && contextTold[i] != hit.lineGeneration()) {
            contextTold[i] = hit.keepColumns(i, contextKeys[i], contextIrqsOff[i], contextClass[i], contextStateColumns[i], true);
        }
        return contextColumns[i];
    }

    private boolean sameContext(int i, RecordedHit hit, boolean irqsOff, int cpu, LatencyPaths.Path path, int ops) {
        return contextColumns[i] != null && contextCpu[i] == cpu && contextIrqsOff[i] == irqsOff && contextPath[i] == path
                && contextOps[i] == ops && hit.wordsEqual(contextKeys[i]);
    }

    /** {@code wprobe_trigger}: points the wprobe at the record's address (or clears it), at the next safe point. */
    private void fire(WprobeTrigger t, TraceRecord r) {
        if (t.filter() != null && !t.filter().matches(r)) return;
        Event target = events.get(WprobeDef.GROUP + "/" + t.wprobe());
        if (target == null) return;
        Probe wp = target.probes.getFirst();
        long address = t.address(r);
        if (!t.clear()) {
            if (address == 0 || address == wp.targetAddress) return;
        } else {
            if (t.field() != null && address != wp.targetAddress) return;
            address = 0;
        }
        wp.targetAddress = address;
        long to = address;
        kprobes.atSafePoint(() -> moveWatch(wp, to));
    }

    /** A trigger's move of wprobe {@code p}: an address that cannot be watched (unmapped) is a miss, as Linux's invalid one is. */
    private void moveWatch(Probe p, long address) {
        if (p.event == null || !probes.contains(p)) return;       // deleted meanwhile
        try {
            watch(p, address);
        } catch (IllegalStateException e) {
            p.registered = true;
            p.watchAddress = 0;
            dropped++;
        }
    }

    private byte[] lastComm = new byte[0];
    private String lastCommString = "";

    /** {@code comm} as text; the previous hit's string when the bytes are the same (most hits). */
    private String commString(byte[] comm) {
        if (!java.util.Arrays.equals(comm, lastComm)) {
            lastComm = comm;
            lastCommString = GuestText.decode(comm);
        }
        return lastCommString;
    }

    /** How Linux fires the event of {@code p}'s return ({@link LatencyPaths}). */
    private static LatencyPaths.Path returnPath(Probe p) {
        return p.def instanceof FprobeDef ? LatencyPaths.Path.FPROBE_EXIT : LatencyPaths.Path.KRETPROBE_RETURN;
    }

    /**
     * The format of the line the machine's native code may write for {@code p}'s recorded returns
     * ({@link RecordedReturnHandler#returnLineFormat}): as {@link #lineFormat}'s for a kretprobe
     * event whose arguments are registers ({@code $retval}) printed as numbers, the head empty (the
     * native code writes the head this engine tells it for the return address, {@link Probe#onRecordedReturn}).
     */
    private byte[] returnLineFormat(Probe p, RecordedHit layout) {
        LineListener[] takers = lineListeners;
        Event e = p.event;
        if (takers == null || (takers.length == 0 && out == null)) return null;
        if (!e.armed || !takesLine(e)) return null;
        if (!p.def.isReturn() || p.def instanceof FprobeDef || !p.returnRecordable()) return null;
        return formatBytes(p, layout, returnPath(p), new byte[0], true);
    }

    /** How Linux fires the event of {@code p}'s entry hit through {@code regs} ({@link LatencyPaths}). */
    private static LatencyPaths.Path entryPath(Probe p, Regs regs) {
        if (p.def instanceof FprobeDef f) return f.tracepoint() ? LatencyPaths.Path.TRACEPOINT : LatencyPaths.Path.FPROBE_ENTRY;
        return switch (regs.entry()) {
            case FTRACE -> LatencyPaths.Path.FTRACE;
            case JUMP -> LatencyPaths.Path.JUMP;
            case BREAKPOINT -> LatencyPaths.Path.BREAKPOINT;
        };
    }

    /**
     * How many ftrace_ops Linux would have on the ftrace site {@code p} fires from: one for the
     * kprobes on ftrace there ({@code kprobe_ftrace_ops}); for fprobes, 6.12 one per fprobe, 7.x
     * one for the entry-only fprobes ({@code fprobe_ftrace_ops}) and one for those with an exit
     * (fgraph's). Only asked for ftrace-site paths, and only counted when an fprobe exists.
     */
    private int ftraceOps(Probe p, LatencyPaths.Path path) {
        if (path != LatencyPaths.Path.FTRACE && path != LatencyPaths.Path.FPROBE_ENTRY) return 1;
        if (!anyFprobe) return 1;
        long function = ftraceFunction(p);
        boolean kprobes = false, entryOnly = false, withExit = false;
        int fprobes = 0;
        for (Probe q : probes) {
            if (!q.registered || !q.event.armed || ftraceFunction(q) != function) continue;
            if (q.def instanceof FprobeDef f) {
                if (f.tracepoint()) continue;
                fprobes++;
                if (q.def.isReturn()) withExit = true;
                else entryOnly = true;
            } else {
                Kprobe k = q.engineProbe == null ? null : q.engineProbe.entryProbe();   // a kretprobe's entry probe too
                if (k != null && (k.flags() & Kprobe.FLAG_FTRACE) != 0) kprobes = true;
            }
        }
        int fprobeOps = latency.fprobeOnFgraph() ? (entryOnly ? 1 : 0) + (withExit ? 1 : 0) : fprobes;
        return (kprobes ? 1 : 0) + fprobeOps;
    }

    /** The function whose ftrace site a probe fires from (its start), 0 for none. */
    private long ftraceFunction(Probe p) {
        if (p.def instanceof FprobeDef f) return symbols.lookupName(p.function != null ? p.function : f.symbol()).orElse(0);
        Kprobe k = p.engineProbe == null ? null : p.engineProbe.entryProbe();
        return k == null ? 0 : symbols.symbolAt(k.address()).map(KernelSymbols.Symbol::start).orElse(0L);
    }

    /** Unregisters every probe (enabled or not) and forgets every event. */
    @Override
    public void close() {
        for (Probe p : new ArrayList<>(probes)) {
            p.event.enabled = false;
            p.event.triggers.clear();
            p.event.wprobeTriggers.clear();
            release(p);
        }
        if (watchIp != null) watchIp.close();
    }
}
