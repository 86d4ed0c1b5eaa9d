package dev.kpemu.examples;

import java.io.PrintStream;
import java.time.Duration;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kretprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;
import dev.kpemu.machine.Arch;

/**
 * Linux's {@code samples/kprobes/kretprobe_example.c} in Java: how long {@code kernel_clone}
 * takes, with the entry time kept as per-instance data ({@code ri->data}) and the exact guest
 * clock: "kernel_clone returned 57 and took 123456 ns to execute".
 */
public final class KretprobeExample {
    public static final String FUNCTION = "kernel_clone";

    private KretprobeExample() {}

    /** One return: the value and the guest nanoseconds between entry and return. */
    public record Call(long returned, long tookNanos, String comm) {}

    /** Boots {@code arch}'s default kernel running three background {@code true}s, printing every return. */
    public static SessionResult run(Arch arch, PrintStream out, java.util.List<Call> calls) {
        try (KpemuSession s = KpemuSession.builder().arch(arch).command("sh", "-c", "true & true & true & wait")
                .timeout(Duration.ofSeconds(30)).build()) {
            s.register(Kretprobe.on(FUNCTION).maxactive(20)
                    .entry(ctx -> ctx.setData(ctx.nanos()))
                    .ret(ctx -> {
                        long entered = ctx.<Long>data();
                        long took = ctx.nanos() - entered;
                        calls.add(new Call(ctx.returnValue(), took, ctx.comm()));
                        out.printf("%s returned %d and took %d ns to execute%n", FUNCTION, ctx.returnValue(), took);
                    }));
            return s.run();
        }
    }

    public static void main(String[] args) {
        SessionResult r = run(args.length > 0 ? Arch.parse(args[0]) : Arch.X86_64, System.out, new java.util.ArrayList<>());
        System.err.println("kpemu: " + r.outcome() + ": " + r.status());
        System.exit(r.outcome() == Outcome.POWERED_OFF ? 0 : 1);
    }
}
