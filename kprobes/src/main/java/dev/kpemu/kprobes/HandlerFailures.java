package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

import dev.kpemu.machine.Machine;

/**
 * Java exceptions thrown by handlers: each is caught (the guest goes on), counted, kept as the
 * last failure and logged once per probe; a guest-memory fault in a handler counts as missed and
 * is offered to the probe's fault handler, as the kernel does for a fault in a handler.
 */
final class HandlerFailures {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");

    private final ArchKprobes arch;
    private final Regs regs;
    private final Set<Kprobe> failedOnce = Collections.newSetFromMap(new IdentityHashMap<>());
    private long handlerFailures;
    private Throwable lastHandlerFailure;

    HandlerFailures(ArchKprobes arch, Regs regs) {
        this.arch = arch;
        this.regs = regs;
    }

    long count() { return handlerFailures; }

    Throwable last() { return lastHandlerFailure; }

    /** {@code which} handler ({@code pre}, {@code post}, {@code entry}, …) of {@code k} threw {@code t}. */
    void handlerFailed(Kprobe k, String which, Throwable t) {
        if (t instanceof VirtualMachineError vme) throw vme;
        handlerFailures++;
        lastHandlerFailure = t;
        if (t instanceof Machine.GuestMemoryException gme) {
            // the kernel's "fault in a handler": counted as missed, offered to the fault handler
            k.nmissed++;
            if (k.faultHandler() != null) {
                try {
                    k.faultHandler().handle(k, regs, arch.memoryFaultTrap());
                } catch (Throwable t2) {
                    if (t2 instanceof VirtualMachineError vme) throw vme;
                }
            }
        }
        if (failedOnce.add(k)) {
            LOG.log(Level.WARNING, "kprobes: " + which + " handler of " + k + " threw " + t + " (reported once per probe; the guest goes on)", t);
        }
    }
}
