package dev.kpemu.examples;

import java.io.PrintStream;
import java.time.Duration;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kprobe;
import dev.kpemu.api.ProbeContext;
import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;
import dev.kpemu.machine.Arch;

/**
 * Linux's {@code samples/kprobes/kprobe_example.c} in Java: a kprobe on {@code kernel_clone}
 * whose pre and post handlers print the probe address and registers, in the sample's words
 * (x86-64: {@code ip} and {@code flags}; arm64: {@code pc} and {@code pstate}).
 *
 * <p>From Java:
 * {@code KprobeExample.run(Arch.X86_64, System.out)}.
 */
public final class KprobeExample {
    public static final String SYMBOL = "kernel_clone";

    private KprobeExample() {}

    /** Boots {@code arch}'s default kernel running {@code sh -c 'true & wait'} (one fork), printing every hit. */
    public static SessionResult run(Arch arch, PrintStream out) {
        try (KpemuSession s = KpemuSession.builder().arch(arch).command("sh", "-c", "true & wait")
                .timeout(Duration.ofSeconds(30)).build()) {
            s.register(Kprobe.on(SYMBOL)
                    .pre(ctx -> out.println(pre(ctx)))
                    .post(ctx -> out.println(post(ctx))));
            return s.run();
        }
    }

    /** {@code handler_pre}'s line. */
    static String pre(ProbeContext ctx) {
        return ctx.arch() == Arch.X86_64
                ? String.format("<%s> p->addr = 0x%x, ip = %x, flags = 0x%x", SYMBOL, ctx.probe().address(), ctx.ip(), ctx.reg("rflags"))
                : String.format("<%s> p->addr = 0x%x, pc = 0x%x, pstate = 0x%x", SYMBOL, ctx.probe().address(), ctx.ip(), ctx.reg("pstate"));
    }

    /** {@code handler_post}'s line. */
    static String post(ProbeContext ctx) {
        return ctx.arch() == Arch.X86_64
                ? String.format("<%s> p->addr = 0x%x, flags = 0x%x", SYMBOL, ctx.probe().address(), ctx.reg("rflags"))
                : String.format("<%s> p->addr = 0x%x, pstate = 0x%x", SYMBOL, ctx.probe().address(), ctx.reg("pstate"));
    }

    public static void main(String[] args) {
        SessionResult r = run(args.length > 0 ? Arch.parse(args[0]) : Arch.X86_64, System.out);
        System.err.println("kpemu: " + r.outcome() + ": " + r.status());
        System.exit(r.outcome() == Outcome.POWERED_OFF ? 0 : 1);
    }
}
