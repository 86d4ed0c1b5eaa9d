package dev.kpemu.session;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.kprobes.KernelProbeRules;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.SlotArea;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.kprobes.events.CompiledProbe;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.EventSetup;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.events.ProbeParser;
import dev.kpemu.kprobes.events.ProbeSites;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.TraceProbe;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;
import dev.kpemu.optprobes.JumpOptimizer;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.LoadedModules;
import dev.kpemu.optprobes.KernelOptimizationInputs;

/**
 * A boot with kprobe_events definitions: they are checked against the kernel's file before the
 * guest runs (a definition Linux would refuse stops the boot before it starts), and registered
 * where Linux's {@code kprobe_event=} boot parameter registers them: when the guest reaches
 * {@value #ARM_AT_BOOT} (an fs_initcall, long after the kernel's own boot-time text patching:
 * ftrace's NOP conversion, alternatives, static calls). Probes in init text live until the kernel
 * frees it ({@value #INIT_FREED_AT}): then they are killed, as Linux kills them. With
 * {@link #armAtInit} they are registered at {@value #ARM_AT_INIT} instead, just before /init.
 * From there on every hit prints an ftrace-format line.
 */
public final class TracedBoot implements BootHooks {
    /** Where Linux registers {@code kprobe_event=} probes ({@code setup_boot_kprobe_events}). */
    public static final String ARM_AT_BOOT = "init_kprobe_trace";
    /** Where probes are registered with {@link #armAtInit}: reached once, just before /init runs. */
    public static final String ARM_AT_INIT = "run_init_process";
    /** Called by the kernel just before it frees its init memory; kills the probes there. */
    public static final String INIT_FREED_AT = "kprobe_free_init_mem";
    /**
     * The slot area: the 2 MiB just below the kernel image ({@code _text}). x86-64: inside the
     * 1 GiB the kernel-image page tables already cover (the kernel clears those entries below
     * {@code _text}), so one 2 MiB page maps it, and rel32 reaches all kernel text. arm64: the top of
     * the module region (the default guests load no modules and no BPF JIT code), so a {@code B}
     * back from a boosted slot reaches; its page tables live in memory the device tree reserves.
     */
    public static long slotsVa(SymbolTable syms) {
        long start = syms.byName("_text").or(() -> syms.byName("_stext")).orElseThrow().address();   // arm64 6.1 lists no _text
        return (start & ~0x1f_ffffL) - 0x20_0000L;
    }

    /**
     * The kernel's own kretprobe trampoline, by the names it has had (6.1 x86 and 6.12+: rethook;
     * arm64 6.1: kretprobe): kpemu's trampoline goes there, so return addresses look as in Linux.
     */
    /** Where Linux recycles a freed task's kretprobe instances (6.1: kprobe_flush_task, rethook_flush_task). */
    public static final String TASK_FREED_AT = "delayed_put_task_struct";
    static final java.util.List<String> KERNEL_TRAMPOLINES = java.util.List.of("arch_rethook_trampoline", "__kretprobe_trampoline", "kretprobe_trampoline");

    /** Thrown from {@link #ready} when a definition is rejected before boot. */
    public static final class DefinitionRejected extends RuntimeException {
        private final ProbeSyntaxException error;
        private final List<String> kernelMessages;

        DefinitionRejected(ProbeSyntaxException error, List<String> kernelMessages) {
            super(error.getMessage());
            this.error = error;
            this.kernelMessages = List.copyOf(kernelMessages);
        }

        public ProbeSyntaxException error() { return error; }

        /** What the kernel prints to its console with the refusal (e.g. "Could not probe notrace function"). */
        public List<String> kernelMessages() { return kernelMessages; }
    }

    /** Thrown from {@link #ready} when a filter, trigger or disable ({@link EventSetup}) is refused before boot. */
    public static final class SetupRejected extends RuntimeException {
        private final EventSetup.Rejected rejected;

        SetupRejected(EventSetup.Rejected rejected) {
            super(rejected.getMessage());
            this.rejected = rejected;
        }

        public EventSetup.Rejected rejected() { return rejected; }
    }

    private final List<String> definitions;
    private EventSetup setup = new EventSetup();
    private final List<Consumer<TraceRecord>> sinks = new ArrayList<>();
    private final PrintStream out;
    /** Every event, only while {@link #keepRecords} is on (the API's default; the CLI streams instead). */
    private final List<TraceRecord> records = new ArrayList<>();
    private boolean keepRecords = true;
    private long armAt = -1, initFreedAt = -1;
    /** The guest's loaded modules, and where the kernel hands a coming / going module over (-1: not watched). */
    private LoadedModules modules;
    private long moduleComingAt = -1, moduleGoingAt = -1;
    private String armAtName;
    private boolean armAtInit;
    private boolean armAtExec;
    /** after=exec specs wait for the tree's exec here (a host breakpoint), -1: not waiting. */
    private long failsAtExec = -1;
    /** The tree whose exec registers everything (only after=exec failures of it, nothing else), or null. */
    private Integer deferToTree;
    private int failsTree;
    private SymbolResolver failsResolver;
    private boolean returnedFromArmPoint;
    private Kprobes kprobes;
    private volatile EventEngine events;
    /** The guest's files as uprobe definitions see them (kpemu's initramfs), null until given. */
    private dev.kpemu.kprobes.events.GuestFiles guestFiles;
    /** The uprobe definitions ({@code PATH:OFFSET} places), parsed at {@link #ready}. */
    private final List<dev.kpemu.kprobes.events.UprobeDef> uprobes = new ArrayList<>();
    private dev.kpemu.kprobes.events.UprobeEvents uprobeEvents;
    private boolean uprobesInWorkload;
    private ProbeSyntaxException rejectedAtRegistration;
    private Boolean optimize;
    private java.time.Duration optimizeDelay = JumpOptimizer.DEFAULT_DELAY;
    private JumpOptimizer optimizer;
    private KernelOptimizationInputs optimizationInputs;
    private KernelProbeRules rules;
    private Dialect dialect = Dialect.LINUX_6_1;
    private Dialect forcedDialect;
    private boolean allowUnsafe;
    private Consumer<String> kernelMessages = System.err::println;
    private List<dev.kpemu.kprobes.fail.FailSpec> fails = List.of();
    private Consumer<dev.kpemu.kprobes.fail.FunctionFailure.Injection> onInjection = i -> { };
    /** Events that do not come from the event engine: injections and uprobe events. */
    private final java.util.concurrent.atomic.AtomicLong eventCount = new java.util.concurrent.atomic.AtomicLong();
    private volatile Machine machine;
    private String release, cmdline;
    /** The booted kernel's file, read for its build-id only when a recorded trace's header is asked for. */
    private dev.kpemu.image.OnDemandFileBytes kernelImage;
    private long initNanos = -1, endNanos = -1;

    /** @param out where trace lines go as they happen (null: only {@link #records()}) */
    public TracedBoot(List<String> definitions, PrintStream out) {
        this.definitions = List.copyOf(definitions);
        this.out = out;
    }

    /**
     * Whether {@link #records()} keeps every event (default on, for tests and API users who look at
     * the whole trace afterwards). Off, nothing holds the events: they only go to {@code out} and
     * the {@link #addSink sinks} as they happen, so memory stays flat however long the run.
     */
    public TracedBoot keepRecords(boolean keep) {
        this.keepRecords = keep;
        return this;
    }

    /**
     * Jump optimization on or off (default {@link #optimizesByDefault}): with it, probes the rules
     * accept become {@code [OPTIMIZED]} after Linux's delay, with the kernel's own tables
     * ({@link KernelOptimizationInputs}).
     */
    public TracedBoot optimize(boolean on) {
        this.optimize = on;
        return this;
    }

    /**
     * Probes Linux refuses (blacklist, notrace functions, jump-label and static-call sites, init
     * text after boot, ...) are accepted: kpemu's extension beyond Linux, off by default.
     */
    public TracedBoot allowUnsafe(boolean allow) {
        this.allowUnsafe = allow;
        return this;
    }

    /**
     * Registers the probes just before /init runs ({@value #ARM_AT_INIT}) instead of where
     * Linux's {@code kprobe_event=} does: nothing from the kernel's own boot is traced, and init
     * text is already freed (probes there are refused).
     */
    public TracedBoot armAtInit(boolean atInit) {
        this.armAtInit = atInit;
        return this;
    }

    /**
     * Registers the probes at the first stop at {@value dev.kpemu.kprobes.fail.FunctionFailure#EXEC_POINT}
     * instead: a machine restored from a snapshot taken there, at the command's exec
     * ({@code kpemu faults}); the failures with {@code after=exec} count from there.
     */
    public TracedBoot armAtCommandExec(boolean atExec) {
        this.armAtExec = atExec;
        if (atExec) this.armAtInit = true;
        return this;
    }

    /**
     * The {@code kprobe_events} language to speak: null (the default) follows the booted kernel
     * ({@link Dialect#forRelease}); a dialect forces that kernel's grammar, types and messages.
     */
    public TracedBoot dialect(Dialect forced) {
        this.forcedDialect = forced;
        return this;
    }

    /** The dialect in use (known after {@link #ready}). */
    public Dialect dialect() { return dialect; }
    /** Receives every traced event (after the filters), in order, from registration on. */
    public TracedBoot addSink(Consumer<TraceRecord> sink) {
        sinks.add(java.util.Objects.requireNonNull(sink));
        return this;
    }

    /** Filters, triggers and disabled events, checked before boot and written when the probes are registered. */
    public TracedBoot setup(EventSetup setup) {
        this.setup = java.util.Objects.requireNonNull(setup);
        return this;
    }

    /** The function whose first execution registers the probes (known after {@link #ready}). */
    public String armedAt() { return armAtName; }

    /** Where the kernel's own messages about probe definitions go (default: standard error). */
    /** Functions made to fail (fault injection, kprobes.fail), armed after the definitions; {@code onInjection} at each failure. */
    public TracedBoot fails(List<dev.kpemu.kprobes.fail.FailSpec> specs, Consumer<dev.kpemu.kprobes.fail.FunctionFailure.Injection> onInjection) {
        this.fails = List.copyOf(specs);
        this.onInjection = java.util.Objects.requireNonNull(onInjection);
        return this;
    }

    public TracedBoot kernelMessages(Consumer<String> sink) {
        this.kernelMessages = sink;
        return this;
    }

    /** Guest time between a probe becoming optimizable and its jump (default Linux's 5 jiffies, {@link JumpOptimizer#DEFAULT_DELAY}). */
    public TracedBoot optimizeDelay(java.time.Duration delay) {
        this.optimizeDelay = delay;
        return this;
    }

    /**
     * x86-64: on, as in Linux ({@code CONFIG_OPTPROBES=y}, {@code debug.kprobes_optimization=1}).
     * arm64: off — Linux has no optprobes there, and kpemu cannot read the arm64 kernel's exception
     * and jump-label tables (no {@code CONFIG_KALLSYMS_ALL}); {@code --optimize} turns it on.
     */
    public static boolean optimizesByDefault(Arch arch) { return arch == Arch.X86_64; }

    /**
     * Checks every definition before the guest runs, as Linux would on this kernel after boot:
     * syntax and symbols, then each probe's site ({@link KernelProbeSites}: notrace functions,
     * the blacklist, reserved sites, the instruction) unless unsafe probes are allowed.
     */
    @Override public void ready(LinuxGuest guest) {
        machine = guest.machine();
        release = guest.release();
        dev.kpemu.boot.PhaseLog.mark("kernel release");
        kernelImage = guest.kernelContents();
        java.util.regex.Matcher cm = java.util.regex.Pattern.compile("cmdline \"(.*)\"").matcher(guest.describe());
        if (cm.find()) cmdline = cm.group(1);
        dialect = forcedDialect != null ? forcedDialect : Dialect.forRelease(guest.release());
        SymbolTable syms = guest.symbols();
        dev.kpemu.boot.PhaseLog.mark("kernel symbols (kallsyms)");
        boolean early = !armAtInit && syms.byName(ARM_AT_BOOT).isPresent();
        // only after=exec failures of one tree: nothing is attached before that task's exec (its
        // first stop at setup_new_exec), as in kpemu faults' rows, which start from a machine kept there
        deferToTree = armAtInit && !armAtExec && !early && setup.isEmpty() && definitions.stream().allMatch(String::isBlank)
                ? commonAfterExecTree() : null;
        armAtName = early ? ARM_AT_BOOT : armAtExec || deferToTree != null ? dev.kpemu.kprobes.fail.FunctionFailure.EXEC_POINT : ARM_AT_INIT;
        KallsymsSymbols symbols = kernelSymbols(guest);
        dev.kpemu.boot.PhaseLog.mark("probe symbols (BTF when the dialect has typed arguments)");
        ProbeParser parser = new ProbeParser(guest.arch(), dialect, symbols);
        KernelTextTables tables = guest.kernelTextTables();
        dev.kpemu.boot.PhaseLog.mark("kernel text tables");
        try (KernelProbeSites sites = new KernelProbeSites(guest.arch(), syms, tables, guest.kernelContents()).dialect(dialect)) {
            rules = sites.rules().initTextFreed(!early);
            effective = new ArrayList<>();
            for (String text : definitions) {
                for (String line : text.split("\n", -1)) {
                    if (ProbeGlob.isGlob(line)) {
                        effective.addAll(expandGlob(line, syms, parser, symbols, sites, guest.arch()));
                        continue;
                    }
                    if (isUprobeDefinition(line)) {
                        uprobes.add(parseUprobe(line, guest.arch()));
                        continue;
                    }
                    effective.add(line);
                    try {
                        if (!(parser.parse(line) instanceof TraceProbe p)) continue;
                        CompiledProbe.compile(p, guest.arch(), symbols);
                        ProbeSites.Answer answer = allowUnsafe ? null : sites.check(p);
                        if (answer != null && !answer.accepted()) throw new DefinitionRejected(answer.error(), answer.console());
                    } catch (ProbeSyntaxException e) {
                        throw new DefinitionRejected(e, List.of());
                    }
                }
            }
        }
        if (!setup.isEmpty()) {
            List<TraceProbe> defs = new ArrayList<>();
            for (String line : effective) {
                try {
                    if (parser.parse(line) instanceof TraceProbe p) defs.add(p);
                } catch (ProbeSyntaxException e) {
                    throw new DefinitionRejected(e, List.of());
                }
            }
            try {
                setup.check(defs, symbols, dialect);
            } catch (EventSetup.Rejected e) {
                throw new SetupRejected(e);
            }
        }
        dev.kpemu.boot.PhaseLog.mark("definitions checked");
        armAt = syms.address(armAtName);
        guest.machine().addBreakpoint(armAt);
        watchModules(guest, syms);
        dev.kpemu.boot.PhaseLog.mark("module watch (BTF)");
        if (early) {
            initFreedAt = syms.byName(INIT_FREED_AT).or(() -> syms.byName("free_initmem")).map(s -> s.address()).orElse(-1L);
            if (initFreedAt != -1) guest.machine().addBreakpoint(initFreedAt);
        }
    }

    /** The definitions registered: the given ones with every glob expanded (kpemu's extension, {@link ProbeGlob}). */
    private List<String> effective;
    private long registrationNanos = -1, registrationCpuNanos = -1;
    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    /** The definitions registered, globs expanded (known after {@link #ready}). */
    public List<String> effectiveDefinitions() { return effective == null ? List.of() : List.copyOf(effective); }

    /** Host time registering and enabling the definitions took at the registration point (-1 before). */
    public long registrationNanos() { return registrationNanos; }

    /** The same in CPU time of the emulation thread (what the machine's other load does not stretch), -1 before. */
    public long registrationCpuNanos() { return registrationCpuNanos; }

    /**
     * One glob definition as the probes Linux would accept: every match is checked as a single
     * definition would be (syntax, site rules); the refused ones are skipped, and one summary line
     * (to the kernel-messages sink) says how many and why. A glob that matches no function, or
     * whose every match is refused, rejects the run (exit 2).
     */
    private List<String> expandGlob(String line, SymbolTable syms, ProbeParser parser, KallsymsSymbols symbols, KernelProbeSites sites, Arch arch) {
        List<ProbeGlob.Symbol> all = new ArrayList<>(syms.symbols().size());
        for (var s : syms.symbols()) all.add(new ProbeGlob.Symbol(s.name(), s.type() == 't' || s.type() == 'T' || s.type() == 'W' || s.type() == 'w'));
        ProbeGlob.Expansion x;
        try {
            x = ProbeGlob.expand(line, all);
        } catch (IllegalArgumentException e) {
            throw new DefinitionRejected(ProbeSyntaxException.registration(line.strip(), 0, 0, null, dev.kpemu.kprobes.Errno.EINVAL), List.of("kpemu: " + e.getMessage()));
        }
        List<String> accepted = new ArrayList<>();
        java.util.Map<String, Integer> reasons = new java.util.TreeMap<>();
        for (String d : x.definitions()) {
            try {
                if (!(parser.parse(d) instanceof TraceProbe p)) continue;
                CompiledProbe.compile(p, arch, symbols);
                ProbeSites.Answer answer = allowUnsafe ? null : sites.check(p);
                if (answer != null && !answer.accepted()) {
                    reasons.merge(reason(answer.error(), answer.console()), 1, Integer::sum);
                    continue;
                }
                accepted.add(d);
            } catch (ProbeSyntaxException e) {
                reasons.merge(reason(e, List.of()), 1, Integer::sum);
            }
        }
        kernelMessages.accept(globSummary(line, accepted.size(), x.definitions().size() - accepted.size(), reasons));
        if (accepted.isEmpty()) {
            throw new DefinitionRejected(ProbeSyntaxException.registration(line.strip(), 0, 0, null, dev.kpemu.kprobes.Errno.ENOENT),
                    List.of("kpemu: " + line.strip() + ": " + (x.matched().isEmpty() ? "no function matches" : "Linux refuses every match")));
        }
        return accepted;
    }

    /** The one line that sums up a glob's expansion: how many probes, how many skipped and why. */
    public static String globSummary(String line, int accepted, int skipped, java.util.Map<String, Integer> reasons) {
        StringBuilder msg = new StringBuilder("kpemu: ").append(line.strip()).append(": ").append(accepted)
                .append(accepted == 1 ? " probe" : " probes");
        if (skipped > 0) {
            msg.append(", ").append(skipped).append(" skipped as Linux refuses them (");
            msg.append(String.join("; ", reasons.entrySet().stream().map(e -> e.getKey() + ": " + e.getValue()).toList())).append(')');
        }
        return msg.toString();
    }

    /** The reason Linux gives, in a few words: the console message, else the error_log message. */
    public static String reason(ProbeSyntaxException e, List<String> console) {
        return dev.kpemu.kprobes.events.ProbeableFunctions.reason(e, console);
    }

    /**
     * Module loads, as trace_kprobe's module notifier sees them: {@code do_init_module(mod)} runs
     * after the kernel's COMING notifiers and before the module's init function, with its symbols
     * relocated; {@code free_module(mod)} runs when it goes (unload or failed init). Kernels whose
     * BTF does not describe {@code struct module} get no module symbols (probes on modules stay
     * pending, as for a module that never loads).
     */
    private void watchModules(LinuxGuest guest, SymbolTable syms) {
        var coming = syms.byName("do_init_module");
        var going = syms.byName("free_module");
        if (coming.isEmpty() || going.isEmpty()) return;
        try {
            modules = new LoadedModules(dev.kpemu.image.btf.ModuleLayout.of(structs(guest).btf()), guest.arch());
        } catch (KernelImageException e) {
            kernelMessages.accept("kpemu: module symbols unavailable: " + e.getMessage());
            return;
        }
        moduleComingAt = coming.get().address();
        moduleGoingAt = going.get().address();
        guest.machine().addBreakpoint(moduleComingAt);
        guest.machine().addBreakpoint(moduleGoingAt);
        rules.moduleText(modules::inText, modules::isFtraceSite);
    }

    /** The first argument register at a function's entry (the host breakpoints below stop there). */
    private static long firstArgument(LinuxGuest guest) {
        return guest.arch() == Arch.X86_64 ? guest.machine().engine().regRead(X86Reg.RDI)
                : guest.machine().engine().regRead(Arm64Reg.X0);
    }

    @Override public boolean breakpoint(LinuxGuest guest, long address) {
        if (address == moduleComingAt && modules != null) {
            String name = modules.load(guest.machine(), firstArgument(guest));
            if (events != null) events.moduleLoaded(name);
            return true;
        }
        if (address == moduleGoingAt && modules != null) {
            String name = modules.nameOf(guest.machine(), firstArgument(guest));
            if (events != null) events.moduleGoing(name);
            modules.unload(name);
            return true;
        }
        if (address == initFreedAt && initFreedAt != -1) {
            guest.machine().removeBreakpoint(initFreedAt);
            initFreedAt = -1;
            rules.initTextFreed(true);
            var init = rules.initText();
            if (kprobes != null && init != null) kprobes.killRange(init.start(), init.end());
            return true;
        }
        if (address == failsAtExec && failsAtExec != -1) {
            GuestTasks tasks = GuestTasks.of(guest, kprobes);
            if (tasks.pid(kprobes.regs()) == failsTree) {
                guest.machine().removeBreakpoint(failsAtExec);
                failsAtExec = -1;
                armFailures(guest, guest.machine(), failsResolver, true);
            }
            return true;
        }
        if (address != armAt || events != null) return false;
        Machine m = guest.machine();
        if (deferToTree != null) {
            KernelStructs k;
            try {
                k = structs(guest);
            } catch (KernelImageException | RuntimeException e) {
                k = null;
            }
            var r = Kprobes.liveRegs(m);
            if (GuestTasks.of(m, r, k).pid(r) != deferToTree) return true;    // another task's exec
        }
        m.removeBreakpoint(armAt);
        if (armAtName.equals(ARM_AT_BOOT) && !returnedFromArmPoint) {
            // Linux's boot probes are registered and enabled by the end of init_kprobe_trace:
            // register at its return (the next block executed in its caller)
            returnedFromArmPoint = true;
            armAt = guest.arch() == Arch.X86_64 ? m.readVirtualLong(m.engine().regRead(X86Reg.RSP))
                    : m.engine().regRead(Arm64Reg.X30);
            m.addBreakpoint(armAt);
            return true;
        }
        // Registering at run_init_process, the snapshot point (BootSnapshot): the machine drops its
        // TLB and translated code as a saved or restored machine does there, so a boot with a
        // snapshot and one without run the same instructions from here on (Machine.flushTranslations).
        if (armAtName.equals(ARM_AT_INIT)) m.flushTranslations();
        dev.kpemu.boot.PhaseLog.mark("registration point reached");
        LinuxGuest.HostArea area = guest.hostArea();
        SymbolTable syms = guest.symbols();
        long va = slotsVa(syms);
        SymbolResolver resolver = modules == null ? SymbolResolver.of(syms) : modules.resolver(SymbolResolver.of(syms));
        kprobes = Kprobes.attach(m, resolver, new SlotArea(va, area.physicalBase(), area.size()))
                .rules(rules).allowUnsafe(allowUnsafe);
        for (String t : KERNEL_TRAMPOLINES) {
            var at = syms.byName(t);
            if (at.isPresent()) {
                kprobes.kretprobeTrampolineAt(at.get().address(), t.contains("rethook"));
                break;
            }
        }
        if (optimize != null ? optimize : optimizesByDefault(guest.arch())) {
            optimizationInputs = dev.kpemu.optprobes.KernelOptimizationInputsInMemory.read(guest.arch(), syms, guest.kernelContents()).forRelease(guest.release());
            optimizer = JumpOptimizer.attach(kprobes, optimizationInputs).delay(optimizeDelay);
            dev.kpemu.boot.PhaseLog.mark("optimizer inputs read");
        }
        try {
            KernelSymbols symbols = modules == null ? kernelSymbols(guest) : modules.symbols(kernelSymbols(guest));
            events = EventEngine.attach(kprobes, symbols, structs(guest), out).dialect(dialect);
            dev.kpemu.boot.PhaseLog.mark("event engine attached (BTF)");
        } catch (KernelImageException e) {
            throw new IllegalStateException("cannot read the kernel's BTF: " + e.getMessage(), e);
        }
        // kept only: a passive listener (hits may be recorded natively, EventEngine.PassiveListener); the engine counts them
        if (keepRecords) events.rules(rules, kernelMessages).addListener((EventEngine.PassiveListener) records::add);
        else events.rules(rules, kernelMessages);
        for (Consumer<TraceRecord> sink : sinks) events.addListener(sink);
        flushTasksWhenFreed(guest, m);
        long t0 = System.nanoTime(), c0 = THREADS.getCurrentThreadCpuTime();
        try {
            events.writeAndEnable(effective);
        } catch (ProbeSyntaxException e) {
            rejectedAtRegistration = e;
            return false;
        } finally {
            registrationNanos = System.nanoTime() - t0;
            registrationCpuNanos = THREADS.getCurrentThreadCpuTime() - c0;
        }
        if (!uprobes.isEmpty()) installUprobes(guest, m);
        dev.kpemu.boot.PhaseLog.mark("probes registered");
        if (!fails.isEmpty()) {
            Integer tree = commonAfterExecTree();
            if (armAtExec || deferToTree != null || tree == null) {
                armFailures(guest, m, resolver, armAtExec || deferToTree != null);
            } else {
                // after=exec: nothing is registered before the tree's exec, a host breakpoint (no
                // guest instruction) finds it, as the run that keeps kpemu faults' exec snapshot
                // stops there: a row and its printed command run the same instructions
                failsTree = tree;
                failsResolver = resolver;
                failsAtExec = guest.symbols().address(dev.kpemu.kprobes.fail.FunctionFailure.EXEC_POINT);
                m.addBreakpoint(failsAtExec);
            }
        }
        try {
            setup.apply(events);
        } catch (EventSetup.Rejected e) {
            throw new SetupRejected(e);   // check() accepted it before boot: not expected
        }
        watchReturnToUser(m);
        return true;
    }

    /** The tree every fail spec counts from its exec ({@code tree=PID,after=exec}), or null when not all do or trees differ. */
    private Integer commonAfterExecTree() {
        Integer tree = null;
        for (var spec : fails) {
            var attr = spec.attr(dev.kpemu.kprobes.fail.FaultAttr.DEFAULT_SEED);
            if (!attr.afterExec() || (tree != null && !tree.equals(attr.tree()))) return null;
            tree = attr.tree();
        }
        return tree;
    }

    private void armFailures(LinuxGuest guest, Machine m, SymbolResolver resolver, boolean execSeen) {
        KernelStructs k;
        try {
            k = structs(guest);
        } catch (KernelImageException | RuntimeException e) {
            k = null;    // no BTF: comm empty and pid 0, as the events without it
        }
        GuestTasks task = GuestTasks.of(m, kprobes, k);
        for (var spec : fails)
            dev.kpemu.kprobes.fail.FunctionFailure.arm(kprobes, resolver, spec, dev.kpemu.kprobes.fail.FaultAttr.DEFAULT_SEED, task, i -> {
                TraceRecord r = injectionRecord(i, task.traceContext(kprobes.regs()), resolver);
                if (keepRecords) records.add(r);
                eventCount.incrementAndGet();
                for (Consumer<TraceRecord> sink : sinks) sink.accept(r);
                onInjection.accept(i);
            }, execSeen);
    }

    /** The group and name of the trace event each injection makes ({@link #injectionRecord}). */
    public static final String INJECTION_GROUP = "kpemu", INJECTION_EVENT = "fail_function";

    /**
     * An injection as a trace line in ftrace's format: event {@code kpemu/fail_function}, the
     * function's entry as a kprobe event prints its place ({@code (FUNC+0x0/0xSIZE)}) and the
     * value it was made to return, {@code retval=-2} (signed decimal, as ftrace prints an s64).
     */
    static TraceRecord injectionRecord(dev.kpemu.kprobes.fail.FunctionFailure.Injection i, dev.kpemu.kprobes.events.TraceContext c,
                                       SymbolResolver symbols) {
        String body = INJECTION_EVENT + ": (" + dev.kpemu.kprobes.fail.FunctionFailure.frame(symbols, i.address()) + ") retval=" + i.retval();
        return new TraceRecord(INJECTION_GROUP, INJECTION_EVENT, c, body, false, i.address(), 0, 0,
                java.util.List.of(new dev.kpemu.kprobes.events.EventArg("retval", dev.kpemu.kprobes.events.FetchType.S64, 0, i.retval(), null)));
    }

    /**
     * A task that dies inside a kretprobed function (do_exit never returns) keeps its instance;
     * Linux gives it back when the task is freed ({@code delayed_put_task_struct}, the RCU callback
     * of {@code put_task_struct_rcu_user}, calls {@code kprobe_flush_task} and
     * {@code rethook_flush_task}), so later tasks still find free instances. A host breakpoint
     * there does the same with kpemu's instances: the argument is {@code &task->rcu}.
     */
    private void flushTasksWhenFreed(LinuxGuest guest, Machine m) {
        var at = guest.symbols().byName(TASK_FREED_AT);
        if (at.isEmpty()) return;
        long rcu;
        try {
            rcu = structs(guest).task("rcu").offset();
        } catch (KernelImageException | RuntimeException e) {
            return;
        }
        m.addBreakpoint(at.get().address(), (mm, a) -> {
            kprobes.flushTask(firstArgument(guest) - rcu);   // delayed_put_task_struct(struct rcu_head *rhp)
            return true;
        });
    }

    /**
     * Pending jumps are written at safe points where the patch window is open; besides the run
     * loop's slice boundaries, this makes every return to user mode one (host breakpoints at the
     * kernel's return-to-user entries), until no jump is pending. Called after registration; call
     * it again after registering more probes directly with {@link #kprobes()}.
     */
    public void watchReturnToUser(Machine m) {
        if (optimizer == null || optimizer.queued() == 0) return;
        for (long at : optimizationInputs.returnToUser()) {
            m.addBreakpoint(at, (mm, a) -> {
                if (optimizer.queued() == 0) mm.removeBreakpoint(a);
                return true;
            });
        }
    }

    /** Notes when /init started (the end of the "boot" phase) and when the guest stopped. */
    @Override public void finished(LinuxGuest guest) {
        var con = guest.console();
        initNanos = con.seenAt("Run /init");
        if (initNanos < 0) initNanos = con.seenAt(dev.kpemu.image.Initramfs.MARK_START);
        endNanos = guest.machine().clock().nanos();
    }

    /**
     * The kernel's GNU build-id (the {@code NT_GNU_BUILD_ID} note of its {@code .notes}, which Linux
     * shows in {@code /sys/kernel/notes}), as hex, or null when the image has none. The image
     * also embeds the vDSO, whose own build-id note looks the same; the kernel's is the one followed
     * by a {@code Linux} note of type 0x100 or more (build salt, LTO info), as {@code .notes} lays
     * them out; the vDSO's {@code Linux} note has type 0.
     */
    static String buildId(byte[] image) {
        byte[] gnu = {4, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
        outer:
        for (int i = 0; i + 16 + 20 <= image.length; i += 4) {            // notes are 4-byte aligned
            for (int j = 0; j < 16; j++) if ((j < 4 || j >= 8) && image[i + j] != gnu[j]) continue outer;
            int size = le32(image, i + 4);
            if (size < 8 || size > 64 || i + 16 + size > image.length) continue;
            int next = i + 16 + ((size + 3) & ~3);
            if (next + 20 > image.length || le32(image, next) != 6 || Integer.compareUnsigned(le32(image, next + 8), 0x100) < 0
                    || !new String(image, next + 12, 6, java.nio.charset.StandardCharsets.ISO_8859_1).equals("Linux\0")) continue;
            return java.util.HexFormat.of().formatHex(image, i + 16, i + 16 + size);
        }
        return null;
    }

    private static int le32(byte[] b, int at) {
        return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16 | (b[at + 3] & 0xff) << 24;
    }

    /** Guest time so far (for progress reports from another thread: a racy read of the clock between slices), or -1 before boot. */
    public long guestNanos() {
        Machine m = machine;
        return m == null ? -1 : m.clock().nanos();
    }

    /**
     * Events so far: the event engine's ({@link EventEngine#recorded}), the injections' and the
     * uprobes'. From another thread than the boot's, a progress figure (the engine's count is read
     * without synchronization); after the boot, exact.
     */
    public long eventCount() {
        EventEngine e = events;
        return eventCount.get() + (e == null ? 0 : e.recorded());
    }

    /**
     * The header of a recorded trace of this boot, known after the boot: the kernel's release,
     * build-id and command line come from the guest; the caller names the rest.
     */
    public dev.kpemu.kprobes.events.RecordedTrace.Header header(Arch arch, String packageName, String packageVersion,
            java.nio.file.Path kernelFile, java.nio.file.Path initramfs, String kpemuVersion, String definitionsSource)
            throws java.io.IOException {
        List<dev.kpemu.kprobes.events.RecordedTrace.Phase> phases = new ArrayList<>();
        if (initNanos >= 0) phases.add(new dev.kpemu.kprobes.events.RecordedTrace.Phase("boot", 0, initNanos));
        if (initNanos >= 0 && endNanos >= initNanos) phases.add(new dev.kpemu.kprobes.events.RecordedTrace.Phase("init", initNanos, endNanos));
        List<String> defs = headerDefinitions();
        return new dev.kpemu.kprobes.events.RecordedTrace.Header(arch, release, packageName, packageVersion,
                kernelFile == null ? null : kernelFile.getFileName().toString(), kernelFile == null ? null : sha256(kernelFile), kernelImage == null ? null : buildId(kernelImage.bytes()),
                kpemuVersion, cmdline, initramfs == null ? null : initramfs.getFileName().toString(),
                initramfs == null ? null : sha256(initramfs), armAtName, definitionsSource, defs, phases);
    }

    /** The definitions a recorded trace's header lists: as given, one per line, without blank lines and comments. */
    public List<String> headerDefinitions() {
        List<String> defs = new ArrayList<>();
        for (String d : definitions) for (String l : d.split("\n")) if (!l.isBlank() && !l.strip().startsWith("#")) defs.add(l.strip());
        return defs;
    }

    /** The events of this boot as a recorded trace with {@code header} (needs {@link #keepRecords}). */
    public dev.kpemu.kprobes.events.RecordedTrace recordedTrace(dev.kpemu.kprobes.events.RecordedTrace.Header header, String source) {
        return dev.kpemu.kprobes.events.RecordedTrace.of(header, records.stream().map(TraceRecord::line).toList(), source);
    }

    public static String sha256(java.nio.file.Path file) throws java.io.IOException {
        try (var in = java.nio.file.Files.newInputStream(file)) {
            var md = java.security.MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
            return java.util.HexFormat.of().formatHex(md.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private dev.kpemu.image.btf.KernelStructs structs;

    /**
     * The kernel's structures from its BTF as the event engine got them (parsed once), once the
     * probes are registered; null before, or when nothing needed them.
     */
    public dev.kpemu.image.btf.KernelStructs kernelStructs() { return structs; }

    /** The kernel's structures from its BTF, parsed once (a few seconds on Debian's kernels). */
    private dev.kpemu.image.btf.KernelStructs structs(LinuxGuest guest) throws KernelImageException {
        if (structs == null) structs = dev.kpemu.boot.KernelStructsInMemory.of(guest);
        return structs;
    }

    private dev.kpemu.kprobes.events.SystemMap systemMap;
    private Boolean systemMapAgrees;

    /**
     * A System.map giving the data symbols the kernel's kallsyms lacks, for wprobes ({@code w@SYM}):
     * used when it agrees with the booted kernel's kallsyms, else refused with one kernel-message line.
     */
    public TracedBoot systemMap(dev.kpemu.kprobes.events.SystemMap map) {
        this.systemMap = map;
        return this;
    }

    /** The kernel's symbols, with its BTF when the dialect uses it (and the System.map's data symbols when one agrees). */
    private KallsymsSymbols kernelSymbols(LinuxGuest guest) {
        KallsymsSymbols k = KallsymsSymbols.forKernel(guest.symbols(), guest.arch(), guest.kernelContents());
        if (systemMap != null) {
            if (systemMapAgrees == null) {
                String why = systemMap.mismatch(k);
                systemMapAgrees = why == null;
                if (why != null) kernelMessages.accept("kpemu: " + why + "; not used");
            }
            if (systemMapAgrees) k = k.withSystemMap(systemMap);
        }
        if (!dialect.hasBtfArgs()) return k;
        try {
            return k.withBtf(structs(guest).btf());
        } catch (KernelImageException e) {
            return k;   // no BTF: untyped $retval stays x64, as on a kernel built without it
        }
    }

    /** The definition the engine refused when registering it, or null. */
    public ProbeSyntaxException rejectedAtRegistration() { return rejectedAtRegistration; }

    /** The event engine, once the probes are registered (null before). */
    public EventEngine events() { return events; }

    /** The uprobe events, once registered (null before, or when no definition is a uprobe). */
    public dev.kpemu.kprobes.events.UprobeEvents uprobeEvents() { return uprobeEvents; }

    /** The guest's files uprobe definitions are resolved against (the initramfs booted); needed when a definition is a uprobe. */
    public TracedBoot guestFiles(dev.kpemu.kprobes.events.GuestFiles files) {
        this.guestFiles = files;
        return this;
    }

    /**
     * Uprobe events enabled only during the guest's workload: from the console line kpemu's
     * /init prints before it ({@code KPEMU-INIT-START}) until the one after it
     * ({@code KPEMU-INIT-DONE}, or a command guest's exit status) — the window in which Linux's
     * recordings enable them (record-uprobes.sh), so init's own processes are not traced.
     * Default: enabled from the registration point.
     */
    public TracedBoot uprobesInWorkload(boolean on) {
        this.uprobesInWorkload = on;
        return this;
    }

    /**
     * Whether a definition line is a uprobe's: {@code p}/{@code r} with a {@code PATH:OFFSET} or
     * (kpemu's extension) {@code PATH:SYMBOL[+OFFS]} place (a {@code /} and a {@code :}, which no kprobe place has).
     */
    public static boolean isUprobeDefinition(String line) {
        String[] t = line.strip().split("\\s+");
        if (t.length < 2 || t[0].isEmpty() || (t[0].charAt(0) != 'p' && t[0].charAt(0) != 'r')) return false;
        return t[1].indexOf('/') >= 0 && t[1].indexOf(':') >= 0;
    }

    /** Whether any of the definitions is a uprobe's. */
    public boolean hasUprobeDefinitions() {
        for (String d : definitions) for (String l : d.split("\n", -1)) if (isUprobeDefinition(l)) return true;
        return false;
    }

    /**
     * kpemu's {@code PATH:SYMBOL[+OFFS]} places resolved at parse time, one line each
     * ({@code PLACE = PATH:0xOFFSET}), for {@code --list}: Linux's uprobe_events takes only offsets.
     */
    public List<String> uprobeSymbolPlaces() { return List.copyOf(uprobeSymbolPlaces); }

    private final List<String> uprobeSymbolPlaces = new ArrayList<>();

    private dev.kpemu.kprobes.events.UprobeDef parseUprobe(String line, Arch arch) {
        if (guestFiles == null) throw new IllegalStateException("a uprobe definition needs the guest's files (guestFiles)");
        String linux = dev.kpemu.kprobes.events.UprobeSymbolPlaces.resolve(line, guestFiles);
        if (!linux.equals(line)) uprobeSymbolPlaces.add(line.strip().split("\\s+")[1] + " = " + linux.strip().split("\\s+")[1]);
        line = linux;
        try {
            if (new dev.kpemu.kprobes.events.UprobeParser(arch, dialect, guestFiles).parse(line) instanceof dev.kpemu.kprobes.events.UprobeDef d) return d;
            throw new IllegalStateException("not a uprobe definition: " + line);
        } catch (ProbeSyntaxException e) {
            throw new DefinitionRejected(e, List.of());
        }
    }

    /**
     * The uprobes: Linux's mapping hooks followed from the registration point on (every exec
     * after it), one host breakpoint per probed user address, records into the same sinks as
     * the kprobe events'.
     */
    private void installUprobes(LinuxGuest guest, Machine m) {
        try {
            KernelStructs k = structs(guest);
            var btf = k.btf();
            java.util.Set<String> files = new java.util.LinkedHashSet<>();
            for (var u : uprobes) files.add(u.file());
            var mappings = new dev.kpemu.kprobes.events.UprobeMappings(m, btf, guest.symbols(), files);
            KernelSymbols symbols = modules == null ? kernelSymbols(guest) : modules.symbols(kernelSymbols(guest));
            uprobeEvents = new dev.kpemu.kprobes.events.UprobeEvents(m, symbols, k, btf, dialect, mappings, guestFiles, uprobes,
                    events.takeEventIds(uprobes.size()), this::uprobeRecord);
            if (uprobesInWorkload) {
                var con = guest.console();
                uprobeEvents.enabledWhile(() -> con.seen(dev.kpemu.image.Initramfs.MARK_START)
                        && !con.seen(dev.kpemu.image.Initramfs.MARK_DONE) && !con.seen(dev.kpemu.image.CommandGuest.EXIT_MARKER));
            }
            new dev.kpemu.kprobes.events.UprobeSites(m, btf, mappings, uprobes, uprobeEvents::hit);
            mappings.install();
        } catch (KernelImageException | ProbeSyntaxException e) {
            throw new IllegalStateException("cannot place the uprobes: " + e.getMessage(), e);
        }
    }

    private void uprobeRecord(TraceRecord r) {
        if (out != null) {
            byte[] line = r.lineBytes();
            out.write(line, 0, line.length);
            out.write('\n');
        }
        if (keepRecords) records.add(r);
        eventCount.incrementAndGet();
        for (Consumer<TraceRecord> sink : sinks) sink.accept(r);
    }

    public Kprobes kprobes() { return kprobes; }

    /** The jump optimizer, once the probes are registered, when optimization is on (else null). */
    public JumpOptimizer optimizer() { return optimizer; }

    /** The kernel tables the optimizer uses (null without optimization). */
    public KernelOptimizationInputs optimizationInputs() { return optimizationInputs; }

    /** Every event recorded so far (empty when {@link #keepRecords} is off). */
    public List<TraceRecord> records() { return records; }
}
