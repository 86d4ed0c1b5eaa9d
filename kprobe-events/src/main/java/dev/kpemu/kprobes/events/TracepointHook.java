package dev.kpemu.kprobes.events;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.kprobes.ArchKernelText;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * A tracepoint probe's way into the kernel, done from outside the guest as
 * {@code tracepoint_probe_register} does it inside: the tracepoint's probe list
 * ({@code struct tracepoint.funcs}) gets one entry, the tracepoint's probestub
 * ({@code __probestub_NAME}, the empty function trace_fprobe attaches to), in a list the host
 * writes into its own area; and every jump-label site of the tracepoint's static key
 * ({@code __jump_table} entries whose key is {@code &__tracepoint_NAME.key}) is turned from its
 * no-op into the jump to the out-of-line call, as {@code arch_jump_label_transform} writes it
 * (x86: {@code jmp rel8}/{@code jmp rel32} over the 2- or 5-byte nop; arm64: {@code b} over the
 * {@code nop}). The tracepoint then calls its default static call target,
 * {@code __traceiter_NAME}, which calls each listed function with {@code (data, args…)}: the
 * probestub, where the event's probe sits. Offsets come from the kernel's BTF. What
 * {@code tracepoint_probe_register} also does and this does not: the tracepoint's
 * {@code regfunc} (syscall tracepoints set a flag on every task there; a tracepoint that has one
 * is refused, rather than traced silently empty), and the static call's retarget to a lone probe
 * (the iterator reaches it the same way).
 */
final class TracepointHook {
    /** {@code TRACEPOINT_DEFAULT_PRIO}. */
    static final int DEFAULT_PRIO = 10;

    private record Patched(long address, byte[] original) {}

    private final Machine machine;
    private final Kprobes kprobes;
    private final long funcsField;
    private final long list;
    private final int listBytes;
    private final List<Patched> patched;
    /** The probes using this hook (the event engine's count). */
    int users;

    private TracepointHook(Machine machine, Kprobes kprobes, long funcsField, long list, int listBytes, List<Patched> patched) {
        this.machine = machine;
        this.kprobes = kprobes;
        this.funcsField = funcsField;
        this.list = list;
        this.listBytes = listBytes;
        this.patched = patched;
    }

    /**
     * Joins tracepoint {@code name}'s probe list with its probestub; null when the kernel has no
     * such tracepoint (trace_fprobe then keeps the probe for a module: it never fires).
     *
     * @throws IllegalStateException when the kernel lacks what the hook needs (BTF, the jump table's bounds)
     */
    static TracepointHook attach(Kprobes kprobes, KernelSymbols symbols, Arch arch, String name) {
        var tp = symbols.lookupName("__tracepoint_" + name);
        if (tp.isEmpty()) return null;
        Btf btf = symbols.btf();
        var stub = symbols.lookupName(FprobeDef.probestub(name));
        var start = symbols.lookupName("__start___jump_table");
        var stop = symbols.lookupName("__stop___jump_table");
        if (btf == null) throw new IllegalStateException("the kernel's BTF is needed to join tracepoint " + name);
        if (stub.isEmpty()) throw new IllegalStateException("the kernel has no " + FprobeDef.probestub(name));
        if (start.isEmpty() || stop.isEmpty()) throw new IllegalStateException("the kernel's symbols do not bound its __jump_table");
        Machine m = kprobes.machine();
        long key = tp.getAsLong() + btf.offsetOf("tracepoint", "key").offset();
        long funcsField = tp.getAsLong() + btf.offsetOf("tracepoint", "funcs").offset();
        if (m.readVirtualLong(funcsField) != 0)
            throw new IllegalStateException("tracepoint " + name + " already has probes in the guest");
        long regfunc = regfunc(m, btf, tp.getAsLong());
        if (regfunc != 0)   // e.g. syscall tracepoints: syscall_regfunc flags every task, or the tracepoint never fires
            throw new IllegalStateException("tracepoint " + name + " needs its regfunc (" + symbols.sprintSymbol(regfunc)
                    + ") run at registration, which kpemu does not do");

        // struct tracepoint_func { void *func; void *data; int prio; }, then a NULL func ending the list
        long funcOff = btf.offsetOf("tracepoint_func", "func").offset();
        long prioOff = btf.offsetOf("tracepoint_func", "prio").offset();
        int entry = (int) ((prioOff + 4 + 7) & ~7L);
        ByteBuffer b = ByteBuffer.allocate(2 * entry).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong((int) funcOff, stub.getAsLong());
        b.putInt((int) prioOff, DEFAULT_PRIO);
        long list = kprobes.allocateHostData(b.array());
        m.writeVirtualLong(funcsField, list);

        List<Patched> patched = new ArrayList<>();
        long from = start.getAsLong(), to = stop.getAsLong();
        byte[] table = m.readVirtual(from, (int) (to - from));
        ByteBuffer t = ByteBuffer.wrap(table).order(ByteOrder.LITTLE_ENDIAN);
        for (int o = 0; o + 16 <= table.length; o += 16) {      // struct jump_entry { s32 code; s32 target; long key; }, relative
            long e = from + o;
            if (((e + 8 + t.getLong(o + 8)) & ~3L) != key) continue;
            int codeRel = t.getInt(o);
            if (codeRel == 0) continue;                            // an init-text site after init
            long code = e + codeRel, target = e + 4 + t.getInt(o + 4);
            byte[] jump = jumpOver(arch, m, code, target);
            if (jump == null) continue;                            // not a no-op (already a jump)
            patched.add(new Patched(code, m.readVirtual(code, jump.length)));
            m.writeVirtual(code, jump);
            m.invalidateCode(code, jump.length);
        }
        return new TracepointHook(m, kprobes, funcsField, list, 2 * entry, patched);
    }

    /**
     * The tracepoint's {@code regfunc}: a member of {@code struct tracepoint} up to 6.x, of the
     * {@code struct tracepoint_ext} its {@code ext} points to in later kernels (7.2's BTF); 0 when none.
     */
    static long regfunc(Machine m, Btf btf, long tracepoint) {
        var direct = btf.member("tracepoint", "regfunc");
        if (direct.isPresent()) return m.readVirtualLong(tracepoint + direct.get().offset());
        var ext = btf.member("tracepoint", "ext");
        if (ext.isEmpty()) return 0;
        long e = m.readVirtualLong(tracepoint + ext.get().offset());
        if (e == 0) return 0;
        return btf.member("tracepoint_ext", "regfunc").map(f -> m.readVirtualLong(e + f.offset())).orElse(0L);
    }

    /** The jump from jump-label site {@code code} to {@code target} over the site's no-op, or null when the site holds none. */
    static byte[] jumpOver(Arch arch, Machine m, long code, long target) {
        ArchKernelText text = ArchKernelText.of(arch);
        return text.jumpOver(m.readVirtual(code, text.jumpLabelSiteBytes()), code, target);
    }

    /** Leaves the tracepoint as it was: its sites' no-ops back, its probe list empty. */
    void detach() {
        for (Patched p : patched) {
            machine.writeVirtual(p.address(), p.original());
            machine.invalidateCode(p.address(), p.original().length);
        }
        machine.writeVirtualLong(funcsField, 0);
        kprobes.freeHostData(list, listBytes);
    }
}
