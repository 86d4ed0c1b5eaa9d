package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.List;
import java.util.Map;
import java.util.Set;

import dev.kpemu.kprobes.Activations.Activation;
import dev.kpemu.kprobes.Activations.Status;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;

/**
 * The hit path ({@code kprobe_int3_handler}, {@code kprobe_breakpoint_handler}): a breakpoint
 * hit runs the pre handlers (newest first), then steps the instruction out of line, simulates
 * it, takes the boosted copy or the optimizer's detour, then runs the post handlers; reentry
 * counts a miss; faults while stepping go to the fault handlers; an optimized probe's hand-off
 * runs the pre handlers on the live registers ({@code optimized_callback}).
 *
 * <p>Reentry and {@code nmissed} are judged on the hitting vCPU's own control block
 * ({@link Activations}, Linux's per-CPU {@code current_kprobe}): a hit on another vCPU while one
 * is stepping is an ordinary hit.
 */
final class HitPath {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");

    private final Machine machine;
    private final ArchKprobes arch;
    private final LiveRegs regs;
    private final SlotArea slots;
    private final Map<Long, ProbePoint> points;
    private final AddressIndex<ProbePoint> atAddress;
    private final Set<Long> formerProbeAddresses;
    private final Activations active;
    private final ProbeArming arming;
    private final ReturnProbes returns;
    private final HandlerFailures failures;
    private final OptimizerBridge optimizers;
    private final OptimizedRegs optimizedRegs;
    private final FtraceRegs ftraceRegs;

    HitPath(Machine machine, ArchKprobes arch, SlotArea slots, ProbeTable table, Activations active, ProbeArming arming,
            ReturnProbes returns, HandlerFailures failures, OptimizerBridge optimizers) {
        this.machine = machine;
        this.arch = arch;
        this.regs = arch.regs();
        this.slots = slots;
        this.points = table.points;
        this.atAddress = table.atAddress;
        this.formerProbeAddresses = table.formerProbeAddresses;
        this.active = active;
        this.arming = arming;
        this.returns = returns;
        this.failures = failures;
        this.optimizers = optimizers;
        this.optimizedRegs = new OptimizedRegs(regs);
        this.ftraceRegs = new FtraceRegs(regs);
    }

    boolean onBreakpoint(long address) {
        arming.syncText();
        ProbePoint p = atAddress.get(address);
        if (p != null && p.armed) {
            onHit(p);
            return true;
        }
        Activation top = active.peek();
        if (top != null && (top.status == Status.HIT_SS || top.status == Status.REENTER) && top.point.slot != 0
                && address == top.point.stepTrap(arch)) {
            machine.setPc(top.point.address + top.point.insn.length());
            finishStep(top);
            return true;
        }
        if (returns.isTrampoline(address)) {
            returns.onKretprobeReturn();
            return true;
        }
        if (formerProbeAddresses.contains(address) && !arming.isBreakpointAt(address)) {
            // hit a breakpoint that was removed meanwhile: run the original instruction
            machine.setPc(address);
            return true;
        }
        return false;
    }

    private void onHit(ProbePoint p) {
        if (!active.isEmpty()) {
            if (p.ftrace && p.needsCallFrame()) ftraceCall(p);
            // kprobe_running(): no handlers, count a miss, still run the instruction
            p.missed();
            if (active.peek().status == Status.REENTER) {
                LOG.log(Level.ERROR, "kprobes: Unrecoverable kprobe detected. (hit at 0x{0} while stepping a reentered probe)", Long.toHexString(p.address));
            }
            startStep(p, null);
            return;
        }
        Activation a = new Activation(p, Status.HIT_ACTIVE);
        active.push(a);
        boolean skip;
        regs.beginHit();
        try {
            if (p.ftrace && p.needsCallFrame()) ftraceCall(p);
            skip = runPreHandlers(p, p.ftrace ? ftraceRegs : regs);
        } finally {
            regs.endHit();
        }
        if (skip) {
            active.pop(a);
            return;
        }
        startStep(p, a);
    }

    /**
     * What the CPU does at a kprobe on an ftrace site in Linux, where the site is a call to ftrace's
     * trampoline: the call pushes its return address (the site + its length) just below the
     * function's stack pointer, where the handlers can read it (recorded: {@code -8($stack):symbol}
     * prints {@code do_sys_openat2+0x5/...} at its entry on Debian's 6.1, 6.12 and 7.2). The kernel
     * keeps no red zone, so nothing lives below the stack pointer. Left out when no enabled
     * handler reads guest memory ({@link Kprobe#readsNoMemory()}): 0.6 µs of a job's event.
     */
    private void ftraceCall(ProbePoint p) {
        long va = regs.sp() - 8, value = p.address + p.insn.length();
        try {
            PageTableWalker.Translation t = regs.pageTables().translate(va);   // in a hit: the hit's registers, no engine call
            if (t == null) return;   // no stack page below: the real call would have faulted the kernel; nothing to show
            if ((va & (t.pageSize() - 1)) <= t.pageSize() - 8) machine.memory().writeStackLong(t.physical(), value);
            else machine.writeVirtualLong(va, value);
        } catch (Machine.GuestMemoryException e) {
            // as above
        }
    }

    /** {@code setup_singlestep}; {@code a} is null on reentry. */
    private void startStep(ProbePoint p, Activation a) {
        long detour = optimizers.detourFor(p.address);
        if (detour != -1) {
            // setup_detour_execution: a probe queued for optimization runs the detour's displaced copy
            if (a != null) active.pop(a);
            machine.setPc(detour);
            return;
        }
        if (p.boosted) {
            if (a != null) active.pop(a);
            machine.setPc(p.slot);
            return;
        }
        if (a == null) {
            a = new Activation(p, Status.REENTER);
            active.push(a);
        } else {
            a.status = Status.HIT_SS;
        }
        if (!p.insn.outOfLine()) {
            arch.simulate(p.insn, p.address, regs);
            finishStep(a);
            return;
        }
        machine.holdInterrupts(true);
        machine.setPc(p.slot);
    }

    /** {@code kprobe_post_process}. */
    private void finishStep(Activation a) {
        if (a.status == Status.REENTER) {
            active.pop(a);
            return;
        }
        a.status = Status.HIT_SSDONE;
        List<Kprobe> children = a.point.children;
        for (int i = 0; i < children.size(); i++) {
            Kprobe k = children.get(i);
            if (k.isDisabled() || k.postHandler() == null) continue;
            try {
                k.postHandler().handle(k, regs, 0);
            } catch (Throwable t) {
                failures.handlerFailed(k, "post", t);
            }
        }
        active.pop(a);
    }

    /** {@code aggr_pre_handler}: newest first; a non-zero return stops and skips the step. */
    private boolean runPreHandlers(ProbePoint p, Regs view) {
        List<Kprobe> children = p.children;
        for (int i = 0; i < children.size(); i++) {      // indexed: no iterator object per hit
            Kprobe k = children.get(i);
            if (k.isDisabled()) continue;
            int r;
            try {
                if (k.owner != null) r = returns.preHandlerKretprobe(k.owner, view);
                else if (k.preHandler() != null) r = k.preHandler().handle(k, view);
                else r = 0;
            } catch (Throwable t) {
                failures.handlerFailed(k, "pre", t);
                r = 0;
            }
            if (r != 0) return true;
        }
        return false;
    }

    /**
     * {@code optimized_callback}: the hand-off of an optimized probe's detour was reached. The live
     * registers are the guest's at the probe; the handlers see the ip the breakpoint path shows
     * ({@link OptimizedRegs}); their return values and ip changes are ignored ({@code opt_pre_handler}).
     */
    void optimizedHit(long address) {
        arming.syncText();
        ProbePoint p = atAddress.get(address);
        if (p == null || !p.anyEnabled()) return; // unregistered or disabled while a vCPU was in the detour
        if (!active.isEmpty()) {
            p.missed();
            return;
        }
        Activation a = new Activation(p, Status.HIT_ACTIVE);
        active.push(a);
        Regs view = optimizedRegs.at(trapIp(address));
        regs.beginHit();
        try {
            for (Kprobe k : p.children) {
                if (k.isDisabled()) continue;
                try {
                    if (k.owner != null) returns.preHandlerKretprobe(k.owner, view);
                    else if (k.preHandler() != null) k.preHandler().handle(k, view);
                } catch (Throwable t) {
                    failures.handlerFailed(k, "pre", t);
                }
            }
        } finally {
            regs.endHit();
        }
        active.pop(a);
    }

    /** The ip a breakpoint hit at {@code address} shows the handlers ({@link ArchKprobes#trapIp}). */
    private long trapIp(long address) {
        return arch.trapIp(address);
    }

    // ------------------------------------------------------------------ faults and safe points

    boolean onFault(long pc, int trapnr) {
        // Acts on no pc outside the slot area but for the sync: the engine's FaultInterest
        // (Kprobes.faultInterest) lets the machine deliver every other fault natively.
        arming.syncText();
        if (slots.contains(pc) && !slots.mappedIn(machine)) {
            slots.map(machine); // the guest switched to tables without the slot area
            return true;
        }
        Activation a = active.peek();
        if (a != null && (a.status == Status.HIT_SS || a.status == Status.REENTER) && a.point.slotContains(pc)) {
            if (a.status == Status.HIT_SS) {
                for (Kprobe k : a.point.children) {
                    if (k.isDisabled() || k.faultHandler() == null) continue;
                    int r;
                    try {
                        r = k.faultHandler().handle(k, regs, trapnr);
                    } catch (Throwable t) {
                        failures.handlerFailed(k, "fault", t);
                        r = 0;
                    }
                    if (r != 0) {
                        active.pop(a);
                        return true;
                    }
                }
            }
            // kprobe_fault_handler: the guest sees the fault at the probed instruction
            machine.setPc(a.point.address);
            active.pop(a);
            return false;
        }
        if (slots.contains(pc)) for (ProbePoint p : points.values()) {
            if (p.boosted && p.slotContains(pc)) {
                machine.setPc(p.address);
                return false;
            }
        }
        if (slots.contains(pc)) {
            // detours live in the slot area: a fault anywhere else (every guest page fault) asks nothing
            long original = optimizers.originalAddress(pc);
            if (original != -1) machine.setPc(original); // a fault in a detour's displaced copy: the guest sees the original pc
        }
        return false;
    }

    /**
     * Between slices: the optimizer may write jumps only when no vCPU runs a handler or has a step
     * in flight (a step ends at the probed instruction's successor, which a jump may displace).
     */
    void onSafePoint() {
        arming.syncText();
        if (active.noneActive()) optimizers.onSafePoint();
    }
}
