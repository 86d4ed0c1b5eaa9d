package dev.kpemu.examples;

import java.io.PrintStream;
import java.time.Duration;
import java.util.List;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;
import dev.kpemu.machine.Arch;

/**
 * The jprobe idea from the seeds (a handler with the probed function's own signature) in Java:
 * {@code do_sys_openat2(int dfd, const char __user *filename, struct open_how *how)} as a record
 * whose components are matched to the parameters by name through the kernel's BTF, and the
 * {@code struct open_how} members read by their BTF names.
 */
public final class TypedEntryExample {
    /** The arguments of {@code do_sys_openat2}, named as in the kernel's source and BTF. */
    public record OpenAt(int dfd, String filename, long how) {}

    /** One call as the handler saw it, with {@code how->flags} and {@code how->mode} read through the BTF. */
    public record Open(String comm, int pid, OpenAt args, long flags, long mode) {}

    private TypedEntryExample() {}

    public static SessionResult run(Arch arch, PrintStream out, List<Open> opens, String... command) {
        try (KpemuSession s = KpemuSession.builder().arch(arch).command(command).timeout(Duration.ofSeconds(30)).build()) {
            s.register(Kprobe.typed("do_sys_openat2", OpenAt.class, (ctx, a) -> {
                long flags = ctx.field("how", "flags").orElse(-1), mode = ctx.field("how", "mode").orElse(-1);
                opens.add(new Open(ctx.comm(), ctx.pid(), a, flags, mode));
                out.printf("%s[%d] do_sys_openat2(dfd=%d, filename=\"%s\", how=0x%x {flags=0%o, mode=0%o})%n",
                        ctx.comm(), ctx.pid(), a.dfd(), a.filename(), a.how(), flags, mode);
            }));
            return s.run();
        }
    }

    public static void main(String[] args) {
        SessionResult r = run(Arch.X86_64, System.out, new java.util.ArrayList<>(), "cat", "/proc/version");
        System.err.println("kpemu: " + r.outcome() + ": " + r.status());
        System.exit(r.outcome() == Outcome.POWERED_OFF ? 0 : 1);
    }
}
