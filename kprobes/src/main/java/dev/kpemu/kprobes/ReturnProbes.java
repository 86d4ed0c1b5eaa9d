package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.kprobes.Activations.Activation;
import dev.kpemu.kprobes.Activations.Status;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.RecordedProbeHits;
import dev.kpemu.machine.StopReason;

/**
 * Kretprobes and their instances ({@code kernel/kprobes.c}'s kretprobe half, or rethook): the
 * per-kretprobe free lists, the entry handler that swaps the return address for the trampoline,
 * the trampoline's return path, task flushing and stack traces with trampoline addresses
 * replaced by the real ones.
 *
 * <p>Instances belong to tasks, not CPUs: one pool per kretprobe for the whole machine, an entry
 * on any vCPU takes an instance ({@code nmissed} when none is free), and the return is matched by
 * frame on whichever vCPU the task returns on. The return handlers run as an active level of the
 * returning vCPU's control block only.
 */
final class ReturnProbes {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");
    /** Default {@code maxactive} with one vCPU: {@link #defaultMaxactive}(1, true) = 10. */
    static final int DEFAULT_MAXACTIVE = 10;
    /**
     * Whether the kernels kpemu boots take {@code register_kretprobe}'s preemptible branch. Linux up
     * to 6.1 chose the default by {@code CONFIG_PREEMPTION}; 6.2 (commit "kprobes: kretprobe events
     * missing on 2-core KVM guest") made the preemptible rule unconditional. Debian 12's 6.1 takes it:
     * recorded on both arches with one CPU, {@code r:e f} lists as {@code r10:}, where the other
     * branch gives {@code r1:} ({@code guest-images/reference/ARCH/6.1/dialect.error_log}); 6.12 and
     * 7.x have no other rule (Debian's arm64 6.12 is built {@code PREEMPT_NONE} and lists {@code r10:}).
     */
    static final boolean PREEMPTIBLE_DEFAULT = true;

    private final Machine machine;
    private final ArchKprobes arch;
    private final LiveRegs regs;
    private final SlotArea slots;
    private final Activations active;
    private final HandlerFailures failures;
    private final Map<Kretprobe, ArrayDeque<KretprobeInstance>> pools = new IdentityHashMap<>();
    private final List<KretprobeInstance> outstanding = new ArrayList<>();
    /** The guest's {@code current} task, for kretprobe instances (0: unknown). */
    private java.util.function.LongSupplier currentTask = () -> 0;
    private long trampoline;
    /** The kernel's own trampoline text while the trampoline lives there ({@link #kretprobeTrampolineAt}), else null. */
    private byte[] kernelTrampolineText;
    /**
     * Kernels whose kretprobes run on rethook (x86 since 5.19, every arch later) hand each
     * instance the return address its entry saw; the older kretprobe code (arm64 6.1) corrects
     * every instance of a frame to the real one first.
     */
    private boolean rethook;

    ReturnProbes(Machine machine, ArchKprobes arch, SlotArea slots, Activations active, HandlerFailures failures) {
        this.machine = machine;
        this.arch = arch;
        this.regs = arch.regs();
        this.slots = slots;
        this.active = active;
        this.failures = failures;
        this.trampoline = slots.allocate();
        slots.write(machine, trampoline, arch.trampolineCode());
    }

    long trampolineAddress() { return trampoline; }

    /** Puts the trampoline at the kernel's own trampoline function (see {@link Kprobes#kretprobeTrampolineAt}). */
    void kretprobeTrampolineAt(long va, boolean rethook) {
        this.rethook = rethook;
        if (!pools.isEmpty()) throw new IllegalStateException("kretprobes are registered: the trampoline cannot move");
        byte[] code = arch.trampolineCode();
        byte[] saved = machine.readVirtual(va, code.length);
        machine.writeVirtual(va, code);
        machine.invalidateCode(va, code.length);
        if (kernelTrampolineText == null) slots.free(trampoline);
        else restoreKernelTrampoline();
        kernelTrampolineText = saved;
        trampoline = va;
    }

    private void restoreKernelTrampoline() {
        machine.writeVirtual(trampoline, kernelTrampolineText);
        machine.invalidateCode(trampoline, kernelTrampolineText.length);
        kernelTrampolineText = null;
    }

    /**
     * {@code register_kretprobe}'s default {@code maxactive} (a kretprobe registered with
     * {@code maxactive <= 0}): {@code max(10, 2 * num_possible_cpus())} on a kernel with
     * {@code CONFIG_PREEMPTION} (and on every kernel from 6.2), else {@code num_possible_cpus()}
     * ({@code kernel/kprobes.c} up to 6.1). The pool is shared by every CPU: an entry on any CPU
     * takes an instance, a return on any CPU gives it back.
     */
    static int defaultMaxactive(int possibleCpus, boolean preemptible) {
        return preemptible ? Math.max(10, 2 * possibleCpus) : possibleCpus;
    }

    /** The default {@code maxactive} on this machine: its vCPUs are the guest's possible CPUs. */
    int defaultMaxactive() { return defaultMaxactive(machine.cpuCount(), PREEMPTIBLE_DEFAULT); }

    /** Checks {@code register_kretprobe}'s limits and gives {@code rp} its free list of instances. */
    void createPool(Kretprobe rp) {
        if (rp.dataSize() > Kretprobe.MAX_DATA_SIZE) throw new KprobeException(Errno.E2BIG, "data size " + rp.dataSize() + " > " + Kretprobe.MAX_DATA_SIZE);
        if (rp.maxactive() <= 0) rp.setMaxactive(defaultMaxactive());
        ArrayDeque<KretprobeInstance> pool = new ArrayDeque<>(rp.maxactive());
        for (int i = 0; i < rp.maxactive(); i++) pool.push(new KretprobeInstance(rp));
        pools.put(rp, pool);
    }

    /** Drops {@code rp}'s free list; its outstanding instances still return correctly but run no handler. */
    void dropPool(Kretprobe rp) {
        pools.remove(rp);
        for (KretprobeInstance ri : outstanding) {
            if (ri.rp != rp) continue;
            ri.rp = null;
            if (ri.nativeSlot >= 0) table.orphaned(ri.nativeSlot);
        }
    }

    /**
     * The native code's table of outstanding instances ({@link RecordedHits}), where it matches
     * the returns it records: told of every instance the Java side takes or gives back, so that
     * it holds all of them while {@link #missingFromTable} is 0.
     */
    interface InstanceTable {
        /** {@code rp}'s instance taken here: its slot, or -1 when the table has no room. */
        int add(Kretprobe rp, long frame, long task, long retAddr);

        /** The instance at {@code slot} went back on the Java side. */
        void remove(int slot);

        /** The instance at {@code slot} lost its kretprobe (unregistered): its return is the Java side's. */
        void orphaned(int slot);

        /** Whether every outstanding instance has a slot. */
        void complete(boolean complete);
    }

    private InstanceTable table = new InstanceTable() {
        @Override public int add(Kretprobe rp, long frame, long task, long retAddr) { return -1; }
        @Override public void remove(int slot) { }
        @Override public void orphaned(int slot) { }
        @Override public void complete(boolean complete) { }
    };
    /** Outstanding instances without a slot in {@link #table}. */
    private int missingFromTable;

    void instanceTable(InstanceTable t) { this.table = java.util.Objects.requireNonNull(t); }

    /** Outstanding instances the native code's table does not hold (returns are recorded only at 0). */
    int missingFromTable() { return missingFromTable; }

    /** The kretprobes with a pool (registered), in no particular order. */
    java.util.Set<Kretprobe> pooled() { return pools.keySet(); }

    /** Every outstanding instance with a slot in the native code's table, with its slot. */
    void forEachInTable(java.util.function.ObjIntConsumer<Kretprobe> action) {
        for (KretprobeInstance ri : outstanding) if (ri.nativeSlot >= 0) action.accept(ri.rp, ri.nativeSlot);
    }

    private void addToTable(KretprobeInstance ri) {
        ri.nativeSlot = table.add(ri.rp, ri.frame, ri.task, ri.retAddr);
        if (ri.nativeSlot < 0 && missingFromTable++ == 0) table.complete(false);
    }

    private void removeFromTable(KretprobeInstance ri) {
        if (ri.nativeSlot >= 0) table.remove(ri.nativeSlot);
        else if (--missingFromTable == 0) table.complete(true);
        ri.nativeSlot = -1;
    }

    /** Told of every instance taken from a pool (-1) and given back (+1) here: the native code's count of free ones follows. */
    private java.util.function.ObjIntConsumer<Kretprobe> poolChanged = (rp, delta) -> { };

    void onPoolChanged(java.util.function.ObjIntConsumer<Kretprobe> listener) { this.poolChanged = java.util.Objects.requireNonNull(listener); }

    /** Instances free in {@code rp}'s pool (-1: it has none). */
    int freeInstances(Kretprobe rp) {
        ArrayDeque<KretprobeInstance> pool = pools.get(rp);
        return pool == null ? -1 : pool.size();
    }

    /** Whether {@code rp}'s entries may be recorded natively ({@link RecordedHits}): a pool, no entry handler to run. */
    boolean entryRecordable(Kretprobe rp) { return rp.entryHandler() == null && pools.containsKey(rp); }

    /**
     * {@code pre_handler_kretprobe} of an entry the machine's native code recorded: it took an
     * instance from the count of {@code rp}'s free ones and swapped the return address
     * {@code retAddr} for the trampoline at the hit, and put it in its table at {@code slot}; the
     * instance is taken from the pool now, with the hit's frame key and task.
     */
    void recordedEntry(Kretprobe rp, long frame, long task, long retAddr, int slot) {
        ArrayDeque<KretprobeInstance> pool = pools.get(rp);
        KretprobeInstance ri = pool == null ? null : pool.poll();
        if (ri == null) {
            // unregistered since the hit (its instances return without a handler), or the native count
            // was wrong: either way the guest returns through the trampoline and must find an instance
            if (pool != null) LOG.log(Level.WARNING, "kretprobe: a recorded entry found no free instance of " + rp.kp.symbolName());
            ri = new KretprobeInstance(rp);
            if (pool == null) ri.rp = null;
        }
        ri.frame = frame;
        ri.task = task;
        ri.retAddr = retAddr;
        ri.nativeSlot = slot;
        if (ri.rp == null) table.orphaned(slot);
        outstanding.add(ri);
    }

    /**
     * A return the native code recorded at the trampoline ({@link RecordedReturnHandler}): the
     * instance at {@code slot} of its table, the only one of the return's frame, which it already
     * freed and counted back to its kretprobe's free instances; taken out of the outstanding ones
     * here (null: none, a defect), for {@link #recordedReturn} or {@link #recordedReturnPassed}.
     */
    KretprobeInstance takeRecorded(int slot) {
        KretprobeInstance ri = null;
        for (int i = outstanding.size() - 1; i >= 0; i--) {
            if (outstanding.get(i).nativeSlot != slot) continue;
            ri = outstanding.remove(i);
            break;
        }
        if (ri == null) {       // the table and the Java side disagree: a defect, the guest itself went on right
            LOG.log(Level.ERROR, "kretprobe: a recorded return of table slot " + slot + " has no instance");
            return null;
        }
        ri.nativeSlot = -1;
        return ri;
    }

    /**
     * {@link #takeRecorded}'s instance returned: its handler runs from {@code hit} with the ip the
     * real return address ({@code counter}: its kretprobe's in the table, whose line format the
     * native code has when {@code formatted}), and the instance goes back to its pool.
     */
    void recordedReturn(KretprobeInstance ri, RecordedProbeHits.Record r, RecordedHit hit, int counter, boolean formatted) {
        Kretprobe rp = ri.rp;
        if (rp == null) return;
        RecordedReturnHandler h = rp.recordedReturnHandler();
        if (h != null) {
            try {
                h.onRecordedReturn(ri, hit.atReturn(r, ri.retAddr, counter, formatted));
            } catch (Throwable t) {
                failures.handlerFailed(rp.kp, "return", t);
            }
        }
        recordedReturnPassed(ri);
    }

    /** {@link #takeRecorded}'s instance back to its pool, its handler's work done (its line went on as text). */
    void recordedReturnPassed(KretprobeInstance ri) {
        Kretprobe rp = ri.rp;
        ArrayDeque<KretprobeInstance> pool = rp == null ? null : pools.get(rp);
        if (pool != null) pool.push(ri);
    }

    /** {@code pre_handler_kretprobe}. */
    int preHandlerKretprobe(Kretprobe rp, Regs regs) {
        ArrayDeque<KretprobeInstance> pool = pools.get(rp);
        KretprobeInstance ri = pool == null ? null : pool.poll();
        if (ri == null) {
            rp.nmissed++;
            return 0;
        }
        poolChanged.accept(rp, -1);
        ri.retAddr = 0;
        ri.frame = arch.entryFrame(regs);
        ri.task = currentTask.getAsLong();
        if (rp.entryHandler() != null) {
            int r;
            try {
                r = rp.entryHandler().handle(ri, regs);
            } catch (Throwable t) {
                failures.handlerFailed(rp.kp, "entry", t);
                r = 0;
            }
            if (r != 0) {
                pool.push(ri);
                poolChanged.accept(rp, 1);
                return 0;
            }
        }
        ri.retAddr = arch.swapReturnAddress(regs, trampoline);
        outstanding.add(ri);
        addToTable(ri);
        return 0;
    }

    /** True when a breakpoint at {@code address} is the trampoline's. */
    boolean isTrampoline(long address) { return address == trampoline; }

    /** The trampoline trapped: run the return handlers of the instances of this frame, newest first, and return for real. */
    void onKretprobeReturn() {
        long frame = arch.returnFrame(regs);
        List<KretprobeInstance> group = new ArrayList<>(2);
        long real = 0;
        for (int i = outstanding.size() - 1; i >= 0; i--) {
            KretprobeInstance ri = outstanding.get(i);
            if (ri.frame != frame) continue;
            group.add(ri);
            if (ri.retAddr != trampoline) {
                real = ri.retAddr;
                break;
            }
        }
        if (real == 0) {
            LOG.log(Level.ERROR, "kretprobe: Return address not found, not execute handler. Maybe there is a bug in the kernel.");
            machine.requestStop(new StopReason.GuestError("kretprobe: return address not found for frame 0x" + Long.toHexString(frame), machine.pc()));
            return;
        }
        Activation busy = new Activation(group.getFirst().rp == null ? null : group.getFirst().rp.kp.point, Status.HIT_ACTIVE);
        active.push(busy);
        regs.beginHit();
        try {
            regs.setIp(real);
            for (KretprobeInstance ri : group) {
                Kretprobe rp = ri.rp;
                if (rp == null || rp.handler() == null) continue;
                // rethook: each instance keeps what its entry saw (a kretprobe that ran after another one
                // on the same function saw the trampoline: Linux prints [unknown/kretprobe'd]);
                // kretprobe: __kretprobe_trampoline_handler sets every instance to the real address
                if (!rethook) ri.retAddr = real;
                try {
                    rp.handler().handle(ri, regs);
                } catch (Throwable t) {
                    failures.handlerFailed(rp.kp, "return", t);
                }
            }
        } finally {
            regs.endHit();
        }
        active.pop(busy);
        for (KretprobeInstance ri : group) {
            outstanding.remove(ri);
            removeFromTable(ri);
            Kretprobe rp = ri.rp;
            ArrayDeque<KretprobeInstance> pool = rp == null ? null : pools.get(rp);
            if (pool != null) {
                pool.push(ri);
                poolChanged.accept(rp, 1);
            }
        }
        machine.setPc(real);
    }

    /** Outstanding kretprobe instances (functions entered and not yet returned). */
    int outstandingInstances() { return outstanding.size(); }

    /** Where the guest's {@code current} task is read at a kretprobe's entry. */
    void currentTask(java.util.function.LongSupplier current) {
        this.currentTask = java.util.Objects.requireNonNull(current);
    }

    /** {@code kprobe_flush_task} / {@code rethook_flush_task} (see {@link Kprobes#flushTask}). */
    int flushTask(long task) {
        if (task == 0) return 0;
        int n = 0;
        for (java.util.Iterator<KretprobeInstance> it = outstanding.iterator(); it.hasNext(); ) {
            KretprobeInstance ri = it.next();
            if (ri.task != task) continue;
            it.remove();
            removeFromTable(ri);
            n++;
            Kretprobe rp = ri.rp;
            ArrayDeque<KretprobeInstance> pool = rp == null ? null : pools.get(rp);
            if (pool != null) {
                pool.push(ri);
                poolChanged.accept(rp, 1);
            }
        }
        return n;
    }

    /** A stack trace as the guest's unwinder would give it (see {@link Kprobes#stackTrace}). */
    long[] stackTrace(Regs r, int max) {
        List<Long> out = new ArrayList<>();
        out.add(fixTrampoline(r.ip(), arch.returnFrame(r)));
        arch.walkFrames(r, (ret, frameKey) -> {
            out.add(fixTrampoline(ret, frameKey));
            return out.size() < max;
        });
        long[] a = new long[out.size()];
        for (int i = 0; i < a.length; i++) a[i] = out.get(i);
        return a;
    }

    private long fixTrampoline(long address, long frameKey) {
        if (address != trampoline) return address;
        for (int i = outstanding.size() - 1; i >= 0; i--) {
            KretprobeInstance ri = outstanding.get(i);
            if (ri.frame == frameKey && ri.retAddr != trampoline) return ri.retAddr;
        }
        return address;
    }

    /** Gives the kernel's trampoline text back, if the trampoline lives there. */
    void close() {
        if (kernelTrampolineText != null) restoreKernelTrampoline();
    }
}
