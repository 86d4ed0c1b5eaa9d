package dev.kpemu.api;

import java.util.List;

import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.KretprobeInstance;
import dev.kpemu.kprobes.Regs;

/**
 * The bridge from the API's probes to the engine's: registers an engine {@code Kprobe} or
 * {@code Kretprobe} whose handlers count the hit, set up the {@link HitContext} and run the Java
 * handler, recording what it throws ({@link HandlerFailure}) instead of letting the engine see it.
 */
final class EngineProbes {
    private final Kprobes kprobes;
    private final HitContext ctx;
    private final List<HandlerFailure> failures;

    EngineProbes(Kprobes kprobes, HitContext ctx, List<HandlerFailure> failures) {
        this.kprobes = kprobes;
        this.ctx = ctx;
        this.failures = failures;
    }

    void register(Probe probe) {
        switch (probe) {
            case Kprobe k -> register(k);
            case Kretprobe r -> register(r);
        }
    }

    void unregister(Probe probe) {
        switch (probe) {
            case Kprobe k -> { if (k.engine != null) kprobes.unregister(k.engine); }
            case Kretprobe r -> { if (r.engine != null) kprobes.unregister(r.engine); }
        }
    }

    private void register(Kprobe k) {
        if (k.engine != null && k.engine.isRegistered()) throw new IllegalStateException(k + " is already registered");
        dev.kpemu.kprobes.Kprobe e = k.symbol() != null ? dev.kpemu.kprobes.Kprobe.at(k.symbol(), k.offset())
                : dev.kpemu.kprobes.Kprobe.at(k.address());
        e.pre((p, regs) -> {
            k.hits++;
            if (k.pre != null) call(k, "pre", k.pre, regs, null, false);
            return 0;
        });
        if (k.post != null) e.post((p, regs, flags) -> call(k, "post", k.post, regs, null, false));
        kprobes.register(e);
        k.engine = e;
    }

    private void register(Kretprobe r) {
        if (r.engine != null && r.engine.kprobe().isRegistered()) throw new IllegalStateException(r + " is already registered");
        dev.kpemu.kprobes.Kretprobe e = dev.kpemu.kprobes.Kretprobe.at(r.symbol()).maxactive(r.maxactive);
        e.entryHandler((ri, regs) -> {
            ctx.forget(ri);       // a recycled instance starts without data
            if (r.entry == null) return 0;
            return call(r, "entry", r.entry, regs, ri, false) ? 1 : 0;
        });
        e.handler((ri, regs) -> {
            r.hits++;
            try {
                if (r.ret != null) call(r, "return", r.ret, regs, ri, true);
            } finally {
                ctx.forget(ri);
            }
            return 0;
        });
        kprobes.register(e);
        r.engine = e;
    }

    /** Runs a handler; returns whether it asked to skip the instance. A failure is recorded, the guest goes on. */
    private boolean call(Probe p, String which, ProbeHandler h, Regs regs, KretprobeInstance ri, boolean atReturn) {
        ctx.begin(p, regs, ri, atReturn);
        try {
            h.handle(ctx);
        } catch (VirtualMachineError e) {
            throw e;
        } catch (Throwable t) {
            failures.add(new HandlerFailure(p, which, ctx.nanos(), t));
        }
        return ctx.skipped();
    }
}
