package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.LiveRegs;
import dev.kpemu.kprobes.arm64.Arm64Regs;
import dev.kpemu.kprobes.x86.X86Regs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * The records of uprobe events ({@code kernel/trace/trace_uprobe.c}'s {@code uprobe_trace_func}):
 * each hit {@link UprobeSites} tells becomes one {@link TraceRecord}, its arguments fetched from
 * the user registers and user memory ({@link CompiledProbe} in its uprobe mode: {@code $stackN}
 * and dereferences are user reads, {@code @+OFFS} is {@code bp_addr - offset + OFFS}), its line
 * {@code TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: (0xADDR) ARGS} as Linux prints it.
 *
 * <p>The task: a uprobe hits in user mode, where the registers do not tell the current task
 * (x86-64's GS base and arm64's SP_EL0 are the user's); it is the owner of the mm that hit
 * ({@code mm_struct.owner}, CONFIG_MEMCG: all of Debian's kernels) — the process's main thread,
 * not another thread of it (a limit: threads share the mm). The latency column is
 * {@link LatencyLayout#userColumn}. Entry probes ({@code p}) only; return probes come next
 * (docs/uprobe-notes.md).
 */
public final class UprobeEvents {
    private record Compiled(UprobeDef def, CompiledProbe program, int id) {}

    private final Machine machine;
    private final MachineFetchContext ctx;
    private final LatencyLayout latency;
    private final TraceFormatter formatter;
    private final long mmOwner;
    private final LongSupplier clock;
    private final Consumer<TraceRecord> sink;
    private final Map<UprobeDef, Compiled> compiled = new LinkedHashMap<>();
    private final Map<UprobeDef, long[]> hits = new LinkedHashMap<>();
    private final CompiledProbe.FetchBuffer buffer = new CompiledProbe.FetchBuffer();
    private final UprobeMappings mappings;
    private final GuestFiles files;
    /** The mm of the hit being fetched. */
    private long hitMm;

    /**
     * @param firstId the trace-event id of the first event (the others follow in order)
     * @param sink    receives every record
     */
    public UprobeEvents(Machine machine, KernelSymbols symbols, KernelStructs structs, Btf btf, Dialect dialect,
                        UprobeMappings mappings, GuestFiles files, List<UprobeDef> probes, int firstId,
                        Consumer<TraceRecord> sink) throws ProbeSyntaxException {
        this.machine = Objects.requireNonNull(machine);
        this.sink = Objects.requireNonNull(sink);
        LiveRegs regs = machine.arch() == Arch.X86_64 ? new X86Regs(machine) : new Arm64Regs(machine);
        this.ctx = new MachineFetchContext(machine, regs, symbols, TaskLayout.of(structs));
        ctx.emptyUserStringFaults(dialect.emptyUserStringFaults());
        this.mappings = Objects.requireNonNull(mappings);
        this.files = Objects.requireNonNull(files);
        ctx.userPages(this::readNotPresent);
        this.latency = LatencyLayout.of(structs, symbols, dialect.hasGenericTifBits());
        this.formatter = new TraceFormatter(symbols);
        this.mmOwner = btf.offsetOf("mm_struct", "owner").bitOffset() / 8;
        this.clock = machine.clock()::liveNanos;
        int id = firstId;
        for (UprobeDef d : probes) {
            if (d.isReturn()) throw new IllegalArgumentException("return uprobes are not traced yet: " + d.command());
            compiled.put(d, new Compiled(d, CompiledProbe.compile(d, machine.arch(), symbols), id++));
            hits.put(d, new long[1]);
        }
    }

    /** The probes, in definition order. */
    public List<UprobeDef> probes() { return new ArrayList<>(compiled.keySet()); }

    /** {@code uprobe_profile}: one line per probe ({@link UprobeDef#profileLine}), in definition order. */
    public List<String> profile() {
        List<String> out = new ArrayList<>();
        hits.forEach((d, n) -> out.add(d.profileLine(n[0])));
        return out;
    }

    /**
     * A user read of a page the process has not touched yet: Linux's {@code copy_from_user}
     * faults it in from the file. Inside a mapping of a probed file (the only file mappings kpemu
     * follows, {@link UprobeMappings}; {@code @+OFFS} reads there) the page's bytes are the
     * file's: a private mapping's page that was never faulted in was never written. Bytes past
     * the end of the file read as 0, as in the file's last page.
     */
    private boolean readNotPresent(long address, byte[] dst, int offset, int len) {
        for (UprobeMappings.Mapping m : mappings.mappings(hitMm)) {
            if (Long.compareUnsigned(address, m.start()) < 0 || Long.compareUnsigned(address + len, m.end()) > 0) continue;
            byte[] bytes = files.contents(m.file());
            if (bytes == null) return false;
            long at = address - m.start() + m.pgoff() * PAGE_SIZE;
            for (int i = 0; i < len; i++) dst[offset + i] = at + i < bytes.length ? bytes[(int) (at + i)] : 0;
            return true;
        }
        return false;
    }

    private static final long PAGE_SIZE = 4096;

    /** One hit ({@code uprobe_dispatcher} → {@code uprobe_trace_func}). */
    public void hit(UprobeSites.Hit hit) {
        Compiled c = compiled.get(hit.probe());
        if (c == null) return;
        hits.get(hit.probe())[0]++;
        long task = machine.readVirtualLong(hit.mm() + mmOwner);
        hitMm = hit.mm();
        ctx.begin();
        ctx.userHit(hit.address() - hit.probe().offset(), task);
        if (!c.program().fetch(ctx, buffer.entryData(null))) return;    // larger than a ring-buffer page: dropped
        byte[] data = buffer.bytes();
        int pid = ctx.pid();
        String comm = GuestText.decode(ctx.comm());
        String lat = latency.userColumn(ctx, task);
        TraceContext tc = new TraceContext(comm, pid, machine.cpu(), lat, clock.getAsLong());
        String head = c.def().event() + ": (0x" + Long.toHexString(hit.address()) + ")";
        CompiledProbe cp = c.program();
        TraceRecord r = new TraceRecord(c.def().group(), c.def().event(), tc, false, hit.address(), 0, c.id(),
                new DecodedArgs(formatter, cp, data),
                () -> formatter.appendArgs(new StringBuilder(head.length() + 64).append(head), cp, data).toString());
        sink.accept(r);
    }
}
