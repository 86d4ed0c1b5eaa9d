/**
 * Linux's kprobe-event subsystem ({@code kprobe_events}) for kpemu guests.
 *
 * <p>The front end: the {@code kprobe_events} language parsed with the kernel's own error_log
 * messages and caret positions ({@link dev.kpemu.kprobes.events.ProbeParser},
 * {@link dev.kpemu.kprobes.events.ProbeSyntaxException}), fetch plans run on each hit
 * ({@link dev.kpemu.kprobes.events.CompiledProbe} over a {@link dev.kpemu.kprobes.events.FetchContext}),
 * and the tracefs text: trace lines, listing, kprobe_profile and format files
 * ({@link dev.kpemu.kprobes.events.TraceFormatter}).
 *
 * <p>The engine: {@link dev.kpemu.kprobes.events.EventEngine} turns definitions into kprobes and
 * kretprobes on a {@link dev.kpemu.kprobes.Kprobes} engine (multiprobe rules, deletes,
 * registration errors, enable/disable, kprobe_profile, format files, error_log); each hit
 * fetches through {@link dev.kpemu.kprobes.events.MachineFetchContext} (registers, kernel and
 * user memory through the guest page tables, the current task as
 * {@link dev.kpemu.kprobes.events.TaskLayout} says) and prints one trace line
 * ({@link dev.kpemu.kprobes.events.TraceRecord}, with its arguments typed:
 * {@link dev.kpemu.kprobes.events.EventArg}). Lines are formatted as the guest's bytes
 * ({@link dev.kpemu.kprobes.events.LineBytes}); while every listener takes lines
 * ({@link dev.kpemu.kprobes.events.EventEngine.LineListener}, the CLI's text trace), an event with
 * no trigger and no filter is handed over as its line and makes no record.
 *
 * <p>What users do with the events, as ftrace: event filters ({@code filter} subpackage), hist
 * triggers ({@code hist} subpackage), over the fields {@link dev.kpemu.kprobes.events.EventFields}
 * names; {@link dev.kpemu.kprobes.events.EventSetup} holds the filters, triggers and disabled
 * events given before a boot, {@link dev.kpemu.kprobes.events.RecordedSetupErrors} Linux's
 * recorded answers to refused ones.
 *
 * <p>Regression against Linux itself: {@link dev.kpemu.kprobes.events.ReferenceTrace} reads the
 * traces recorded under QEMU ({@code guest-images/reference}),
 * {@link dev.kpemu.kprobes.events.TraceComparator} compares kpemu's lines with them (exactly on
 * the recorded kernel build, tolerantly on a rebuilt one; the rule is in its documentation).
 *
 * <p>Default behaviour is Linux 6.1's (Debian 12).
 *
 * <p>the <code>kprobe_events</code> language of the booted kernel (<code>Dialect.forRelease</code>: Debian 12's 6.1, 13's 6.12 (6.10-6.14), unstable's 7.x (6.15+); <code>--dialect</code> forces one): <code>ProbeParser</code> (every error with the kernel's message, caret and errno; on 6.10+ BTF arguments from the kernel's own BTF through <code>BtfFunction</code>: parameter names, <code>$arg*</code>/<code>$argN</code> expansion, <code>-&gt;</code>/<code>.</code> member access, <code>$retval</code> typed from the prototype, <code>:%pd</code>/<code>:%pD</code>, the kernel's automatic argument names; a return probe's <code>$argN</code> is saved at entry by the kretprobe's entry handler; on 6.12+ kernels with CONFIG_FPROBE_EVENTS, which <code>KernelSymbols.hasFprobeEvents</code> tells from the kernel's symbols, <code>dynamic_events</code>' fprobe and tracepoint-probe events, <code>FprobeDef</code>: <code>f</code> entry (a probe on the function's ftrace site; arm64: on its entry, reporting the site; an ftrace glob: one on each function it matches), <code>f…%return</code> exit (a return probe), <code>t</code> (<code>TracepointHook</code> puts the tracepoint's probestub on its probe list, in the host area, and turns its jump-label sites into jumps, as <code>tracepoint_probe_register</code> does; the event's probe sits on the probestub)), compiled fetch programs over a <code>FetchContext</code> (kernel fetches below TASK_SIZE read user memory, as Linux's <code>probe_mem_read</code> on both arches, which select CONFIG_ARCH_HAS_NON_OVERLAPPING_ADDRESS_SPACE; before 6.13 an empty user string prints <code>(fault)</code>, <code>Dialect.emptyUserStringFaults</code>: recorded, <code>reference/ARCH/SERIES/rawbytes.trace</code> and <code>kuser.trace</code>), <code>GuestText</code> (the guest's bytes in Java strings, losslessly: UTF-8 with surrogateescape, a byte that is not UTF-8 as U+DC80..U+DCFF; every output encodes them back — text trace, <code>-o</code>, <code>--record</code> files and the references read as bytes, filters and hist keys compare bytes; JSON and Perfetto show valid Unicode and carry such bytes in base64 beside it), <code>TraceFormatter</code> (ftrace <code>trace</code> lines, <code>kprobe_profile</code>, <code>format</code> files), <code>TraceRecord</code> (one event: the context columns — the cpu is the hitting vCPU's — the probe point resolved at the hit and the fetched entry; its arguments' text is formatted when it is read, as ftrace formats its ring buffer at read time, so a hit costs the fetch and not the formatting), <code>LatencyFlags</code> + <code>LatencyPaths</code> + <code>LatencyLayout</code> (the latency column and <code>common_flags</code>/<code>common_preempt_count</code>: ftrace's trace context word from the guest's state at the hit — interrupt flag, preempt_count, TIF flags, migration_disabled, found from the kernel's BTF and kallsyms — plus what the probe's path adds in Linux: x86 int3's NMI entry, the ftrace/optimized/kretprobe/fprobe/tracepoint handlers' preempt_disables, arm64's BRK; <code>tracing_gen_ctx_dec</code>'s decrement included), <code>KallsymsSymbols</code>, <code>LoadedModules</code> (the guest's modules read from its memory at <code>do_init_module</code>/<code>free_module</code>: their kallsyms, text and ftrace sites; wraps the symbol views so <code>MOD:SYM</code> resolves and module addresses print <code>[mod]</code>; <code>EventEngine.moduleLoaded</code> arms pending <code>MOD:SYM</code> probes as trace_kprobe's module notifier does), <code>DefinitionCheck</code> + <code>KernelProbeSites</code> (what writing a definition gives, decided from the kernel file — except the instruction inside a boot-patched site, which the registration decides on the running kernel's text as Linux does (<code>BootPatchedSitesTest</code>, <code>reference/x86_64/SERIES/patched.error_log</code>): <code>check-events</code> and the pre-boot check; for an fprobe, its ftrace filter against the functions holding an ftrace site, and a new event's name against the kernel's own trace events, read from the file), <code>RecordedErrorLog</code> / <code>ReferenceTrace</code> (Linux's recorded answers), <code>ProbeableFunctions</code> + <code>FunctionVariables</code> (discovery: <code>kpemu funcs</code>, <code>kpemu vars</code>), <code>RecordedTrace</code> (kpemu's own recorded traces: <code>boot --record</code>'s header and events; <code>RecordedTraceWriter</code> spools them as they happen, <code>RecordedTraceReader</code> reads one as it goes), <code>TraceComparator</code> (against Linux's references: the event and the latency column's irqs-off, hard/soft irq, preempt and migrate-disable depth; need-resched is not compared), <code>TraceComparison</code> + <code>TraceAssert</code> (golden against run: mode from the headers, semantic diff, JUnit-usable assertion; <code>StreamingTraceComparison</code> does it one event at a time, keeping only what the diff shows)
 *
 * <p><b>Reference traces, answers and lists: Linux itself.</b>
 * Every expectation about Linux's behaviour comes from Linux running under QEMU on the same kernel
 * and initramfs, recorded by the scripts in {@code guest-images/} (they share {@code
 * qemu-reference.sh}, take {@code --kernel debian[:SUITE][@RELEASE]}, and write per kernel series
 * to {@code guest-images/reference/ARCH/SERIES/}): {@code record-reference.sh} (traces), {@code
 * record-error-log.sh} (each definition's answer: accepted and listed, or errno, error_log and
 * console message; {@code dialect.ARCH.commands} is recorded on 6.1, 6.12 and 7.2, BTF-argument
 * rows included; {@code fprobe.ARCH.commands}, fprobe and tracepoint-probe rows, written to {@code
 * dynamic_events}; {@code RecordedErrorLogTest} replays each kernel's recordings through {@code
 * DefinitionCheck} in that kernel's dialect, with its BTF), {@code record-kernel-lists.sh}
 * (debugfs {@code kprobes/blacklist}, tracefs {@code available_filter_functions}; {@code
 * KernelTextTablesTest}), {@code record-kallsyms.sh} ({@code /proc/kallsyms}). {@code
 * KernelMatrixTest} runs the kernel checks for Debian 12, 13 and unstable on both arches. A
 * suite's references are all recorded on one build, named in {@code
 * guest-images/reference/kernels} ({@code RecordedKernelsTest} checks every recorded header
 * against it); the tests boot that build ({@code debian:SUITE@RELEASE}, {@code RecordedKernels}),
 * not whatever Debian uploaded since — only {@code newestBuildBootsTheWorkloadToPowerOff} boots
 * each suite's newest. {@code record-corpus.sh [--kernel debian:SUITE] ARCH} records the
 * differential corpus of one kernel: {@code CorpusGenerator} ({@code kpemu corpus generate},
 * deterministic from a seed, BTF-typed from that kernel's BTF, in its dialect, machine-independent
 * values only) writes hundreds of definitions over the functions the workload runs (surveyed under
 * QEMU with ftrace's function tracer; per kernel series, {@code
 * reference/ARCH/SERIES/corpus.{survey,events,trace}}); the corpus guest ({@code CorpusGuest},
 * {@code kpemu corpus initramfs}) writes them to tracefs from its /init, runs the default workload
 * as process 1 and prints Linux's {@code trace}; {@code CorpusTraceTest} boots the same guest on
 * kpemu (definitions registered before /init) and compares the workload's window (between two
 * marker events, events of the workload's own tasks: kernel threads run when the machine's timing
 * says) event by event, on Debian 12's 6.1, 13's 6.12 and unstable's 7.x, both arches (about 560
 * definitions over about 140 functions per kernel and arch, 2,260 to 2,700 events each, all
 * equal). The generator's class comment lists what it leaves out and why (machine-dependent
 * values, with the recorded evidence); kpemu defects the corpus found are replayed by {@code
 * CorpusDefectsTest} from small scripts recorded with {@code record-reference.sh} ({@code
 * fetchquirks}: how 6.1 stores strings and symstr; {@code exitpath}: instances of dying tasks;
 * {@code optip}: an optimized probe's registers; {@code ftraceregs}: what a probe on an x86 ftrace
 * site reads, {@code orig_ax} 0 and the trampoline call's return address below the stack pointer,
 * as ftrace's frame holds them; {@code jumplabel}: arm64 6.1's static branches, whose {@code
 * __jump_table} {@code KernelTextTables} finds by its shape when no symbols bound it). {@code
 * RawBytesTraceTest} (issue 32) compares {@code rawbytes} (its own {@code /init}: file names and a
 * comm whose bytes are not UTF-8, an empty name; 6.1, 6.12 and 7.2, both arches) byte for byte —
 * the engine's trace, stdout, {@code -o}, {@code --record} + {@code --expect}, and the JSON lines
 * with their {@code raw_args} — and {@code kuser} (kernel fetches of a user address, 6.1). {@code
 * record-filters.sh [--kernel debian:SUITE@RELEASE] ARCH NAME} records what Linux does with
 * events: the corpus guest writes {@code reference/NAME.ARCH.events} (or {@code
 * reference/ARCH/SERIES/NAME.events} when the series needs its own) to kprobe_events, enables
 * them, appends the tracefs writes of {@code reference/NAME.ARCH.setup} (filters, hist triggers,
 * enables; a refused write prints the file's error text), runs the workload and prints the trace
 * and every {@code hist} file ({@code NAME.trace}, {@code NAME.hist}, {@code NAME.filter-errors});
 * {@code FilterHistTraceTest} boots the same guest with the same {@code EventSetup} on each kernel
 * of the matrix (6.1, 6.12, 7.2; filters and triggers parsed as the booted kernel does, {@code
 * Dialect.filters()} → {@code FilterDialect}) and compares the workload's window and every hist
 * file (read where the after script starts; its own reads run as comm {@code after}/{@code
 * busybox}, which the triggers' filters leave out, since Linux's triggers still fire after {@code
 * tracing_on} is cleared). The same script records {@code fprobes} and {@code tprobes} (the corpus
 * guest writes {@code f}/{@code t} definitions to {@code dynamic_events}; empty setup) on 6.12
 * x86_64 and 7.2 both arches; {@code FprobeTraceTest} boots that guest on each kernel of the
 * matrix and compares the window task by task (on 6.1 and arm64's 6.12 it checks the refusal).
 * <p>
 * {@code guest-images/record-reference.sh ARCH NAME} boots the same Debian kernel and initramfs
 * under QEMU with the definitions of {@code guest-images/reference/NAME.ARCH.events} on the kernel
 * command line ({@code kprobe_event=… trace_event=… tp_printk}) and stores the event lines Linux
 * itself printed in {@code guest-images/reference/ARCH/SERIES/NAME.trace}, with the kernel version
 * in the header. kpemu's traces are compared against these ({@code TraceComparator}, event by
 * event: event name, probe point, return site and probed function, every argument; never
 * timestamps, pids, comm or cpu). On the recorded build (same {@code uname -r} and, when known,
 * Debian package version) the comparison is exact; on any other build it tolerates what a rebuild
 * moves: a kprobe's {@code sym+off/size} must keep {@code sym+off} (the size may change), a
 * kretprobe's return site must keep its caller symbol (offset and size may change), {@code
 * symbol}-typed values must keep their symbol name; every other value and the number of events
 * must be equal. When that fails on a new Debian build, re-record.
 *
 * <p><b>Users' goldens.</b>
 * {@code kpemu boot --record FILE} writes a {@code RecordedTrace}: a header (kernel release,
 * Debian package and version, the kernel file's sha256, the build-id note found in the kernel
 * image, arch, kpemu version, command line, initramfs sha256, the registration point, guest-time
 * phases, the definitions) and full {@code trace} lines. It is a {@code ReferenceTrace} too, so
 * {@code TraceComparator} compares it; {@code TraceComparison} picks the mode (exact on the same
 * build-id / file / release+version, else tolerant) and, in exact mode on the same workload, also
 * compares task and cpu columns and the timestamps (guest time is deterministic on both arches).
 * {@code --expect}, {@code kpemu compare} and {@code TraceAssert} share it; exit code 5 means
 * "differs".
 *
 * <p><b>Reference symbols.</b>
 * {@code guest-images/record-kallsyms.sh ARCH KERNEL} records Linux's own {@code /proc/kallsyms}
 * under QEMU (count, sha256 of the sorted lines, samples) in {@code
 * guest-images/reference/ARCH/kallsyms-RELEASE.txt}; {@code KallsymsReferenceTest} requires
 * kpemu's table to equal it line for line (by digest) for every kernel present whose release was
 * recorded.
 */
package dev.kpemu.kprobes.events;
