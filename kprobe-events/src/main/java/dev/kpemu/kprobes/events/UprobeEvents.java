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
 * {@link LatencyLayout#userColumn}.
 *
 * <p>Return probes ({@code r}, {@code %return}): Linux replaces the return address with its
 * {@code [uprobes]} trampoline and keeps a per-task stack of return instances. kpemu writes
 * nothing: at the entry hit it reads the return address (x86-64 {@code [sp]}, arm64 {@code x30})
 * and puts a host breakpoint there (the instruction after a call starts a block), with an
 * instance (mm's page-table root, function, return address, entry stack pointer). When the guest
 * reaches it with the stack pointer the entry's frame returns with (x86-64 entry sp + 8, arm64
 * the entry sp), that frame's instances fire, newest first (Linux's consumer order: the probe
 * registered last first, as recorded); instances of deeper frames are dropped without an event,
 * as Linux's {@code cleanup_return_instances} drops frames a {@code longjmp} left (also at every
 * new entry, as {@code prepare_uretprobe} does); outer frames of a recursion stay. A return
 * address reached by a jump from user code (a {@code longjmp} to a join point that is also a
 * call's return address: Unicorn's previous block ends in no return instruction) fires nothing:
 * Linux's trampoline is reached only by a return. Not done: the guest-visible hijack ({@code [uprobes]} in
 * {@code /proc/PID/maps}, the trampoline address on the stack), a return address that is
 * another host breakpoint, exits with instances pending (kept until the mm's root returns).
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
            compiled.put(d, new Compiled(d, CompiledProbe.compile(d, machine.arch(), symbols), id++));
            hits.put(d, new long[1]);
        }
    }

    private java.util.function.BooleanSupplier enabled = () -> true;

    /**
     * When the events are enabled ({@code events/uprobes/EVENT/enable}; default: always): while
     * it says false a hit is neither counted nor traced and starts no return instance, and a
     * pending return does not fire, as Linux's consumers are unregistered while disabled.
     */
    public UprobeEvents enabledWhile(java.util.function.BooleanSupplier enabled) {
        this.enabled = Objects.requireNonNull(enabled);
        return this;
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

    /** A pending return ({@code struct return_instance}). */
    private record Pending(Compiled probe, long root, long func, long ret, long sp, long mm) {}

    private final List<Pending> pending = new ArrayList<>();

    private long pageTableRoot() {
        if (machine.arch() == Arch.X86_64) return machine.engine().regRead(dev.kpemu.unicorn.X86Reg.CR3) & 0x000f_ffff_ffff_f000L;
        return machine.engine().regRead(dev.kpemu.unicorn.Arm64Reg.TTBR0_EL1) & 0x0000_ffff_ffff_fffeL;
    }

    private long userStackPointer() {
        return machine.engine().regRead(machine.arch() == Arch.X86_64 ? dev.kpemu.unicorn.X86Reg.RSP : dev.kpemu.unicorn.Arm64Reg.SP);
    }

    /** The entry of a return probe's function: an instance, and a host breakpoint at the return address. */
    private void entered(Compiled c, UprobeSites.Hit hit) {
        long sp = userStackPointer();
        long ret;
        if (machine.arch() == Arch.X86_64) {
            ctx.begin();
            byte[] w = new byte[8];
            if (!ctx.readUser(sp, w, 0, 8)) return;
            ret = java.nio.ByteBuffer.wrap(w).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
        } else {
            ret = machine.engine().regRead(dev.kpemu.unicorn.Arm64Reg.X30);
        }
        long root = pageTableRoot();
        // once per hit: the return probes of one address are consumers of one uprobe, and Linux
        // cleans up once before their shared instance
        long stamp = machine.clock().instructions();
        if (stamp != cleanedAt || hit.address() != cleanedFor) {
            dropAbandoned(root, sp);
            cleanedAt = stamp;
            cleanedFor = hit.address();
        }
        boolean armed = pending.stream().anyMatch(p -> p.ret() == ret);
        if (!armed && machine.hasBreakpoint(ret)) return;       // another host breakpoint there: not handled
        pending.add(new Pending(c, root, hit.address(), ret, sp, hit.mm()));
        if (!armed) machine.addBreakpoint(ret, (m, address) -> { returned(address); return true; });
    }

    /**
     * Linux's {@code cleanup_return_instances} at a new entry ({@code prepare_uretprobe}): the
     * mm's newest instances whose frames are gone ({@code arch_uretprobe_is_alive(RP_CHECK_CALL)}:
     * x86-64 alive while sp &lt; the instance's, arm64 while sp &lt;= it) are dropped without an
     * event — frames a {@code longjmp} left, whose return addresses may yet be reached by a jump.
     */
    private long cleanedAt = -1, cleanedFor;

    private void dropAbandoned(long root, long sp) {
        boolean x86 = machine.arch() == Arch.X86_64;
        for (int i = pending.size() - 1; i >= 0; i--) {
            Pending p = pending.get(i);
            if (p.root() != root) continue;
            int c = Long.compareUnsigned(sp, p.sp());
            if (x86 ? c < 0 : c <= 0) break;
            pending.remove(i);
            if (pending.stream().noneMatch(q -> q.ret() == p.ret())) machine.removeBreakpoint(p.ret());
        }
    }

    /**
     * True when the guest came to a watched return address from user code by another way than a
     * return (the block before ends in a jump: {@code longjmp}'s {@code jmp *%rdx} / {@code br x30}
     * to a join point that is also a call's return address). Linux fires a return only when its
     * trampoline, which replaced the return address on the stack, is reached; a jump to the
     * original address never reaches it. Unknown (a hit at a slice's start) counts as a return.
     */
    private boolean reachedByJump() {
        long[] from = machine.breakpointArrivalBlock();
        if (from == null || from[0] < 0 || from[1] <= 0 || from[1] > 4096) return false;
        byte[] code = new byte[(int) from[1]];
        ctx.begin();
        if (!ctx.readUser(from[0], code, 0, code.length)) return false;
        try (dev.kpemu.decoder.Decoder d = dev.kpemu.decoder.Decoder.open(machine.arch())) {
            List<dev.kpemu.decoder.Instruction> insns = d.decodeAll(code, from[0]).instructions();
            return !insns.isEmpty() && insns.getLast().branchKind() != dev.kpemu.decoder.BranchKind.RETURN;
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** The guest reached a return address kpemu watches: the returning frame's instances fire. */
    private void returned(long address) {
        if (reachedByJump()) return;       // the instances stay until an entry drops them, as Linux's
        long root = pageTableRoot();
        long sp = userStackPointer();
        long entrySp = machine.arch() == Arch.X86_64 ? sp - 8 : sp;
        List<Pending> fire = new ArrayList<>();
        for (int i = pending.size() - 1; i >= 0; i--) {
            Pending p = pending.get(i);
            if (p.root() != root || p.ret() != address) continue;
            if (p.sp() == entrySp) fire.add(p);
            else if (Long.compareUnsigned(p.sp(), entrySp) > 0) continue;    // an outer frame (recursion)
            pending.remove(i);                                                // this frame, or one a longjmp left
        }
        if (pending.stream().noneMatch(p -> p.ret() == address)) machine.removeBreakpoint(address);
        if (!enabled.getAsBoolean()) return;
        for (Pending p : fire) emitReturn(p);
    }

    private void emitReturn(Pending p) {
        Compiled c = p.probe();
        long task = machine.readVirtualLong(p.mm() + mmOwner);
        hitMm = p.mm();
        ctx.begin();
        ctx.userHit(p.func() - c.def().offset(), task);      // uretprobe_dispatcher: bp_addr = func
        if (!c.program().fetch(ctx, buffer.entryData(null))) return;
        String head = c.def().event() + ": (0x" + Long.toHexString(p.ret()) + " <- 0x" + Long.toHexString(p.func()) + ")";
        record(c, task, true, p.func(), p.ret(), head);
    }

    /** One hit ({@code uprobe_dispatcher} → {@code uprobe_trace_func}). */
    public void hit(UprobeSites.Hit hit) {
        Compiled c = compiled.get(hit.probe());
        if (c == null || !enabled.getAsBoolean()) return;
        hits.get(hit.probe())[0]++;         // uprobe_dispatcher counts every probe at the entry
        if (c.def().isReturn()) {
            entered(c, hit);
            return;
        }
        long task = machine.readVirtualLong(hit.mm() + mmOwner);
        hitMm = hit.mm();
        ctx.begin();
        ctx.userHit(hit.address() - hit.probe().offset(), task);
        if (!c.program().fetch(ctx, buffer.entryData(null))) return;    // larger than a ring-buffer page: dropped
        record(c, task, false, hit.address(), 0, c.def().event() + ": (0x" + Long.toHexString(hit.address()) + ")");
    }

    /** The record of the fetch in {@link #buffer}: ip the probed address (entry) or the function, retIp the return address. */
    private void record(Compiled c, long task, boolean isReturn, long ip, long retIp, String head) {
        byte[] data = buffer.bytes();
        int pid = ctx.pid();
        String comm = GuestText.decode(ctx.comm());
        String lat = latency.userColumn(ctx, task);
        TraceContext tc = new TraceContext(comm, pid, machine.cpu(), lat, clock.getAsLong());
        CompiledProbe cp = c.program();
        TraceRecord r = new TraceRecord(c.def().group(), c.def().event(), tc, isReturn, ip, retIp, c.id(),
                new DecodedArgs(formatter, cp, data),
                () -> formatter.appendArgs(new LineBytes(head.length() + 64).text(head), cp, data).toText(), true);
        sink.accept(r);
    }
}
