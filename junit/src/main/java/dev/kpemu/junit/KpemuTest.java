package dev.kpemu.junit;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.kpemu.machine.Arch;

/**
 * A test (it is a JUnit {@code @Test}) that gets a {@link dev.kpemu.api.KpemuSession} parameter
 * built from this annotation: it registers its probes, calls {@code run()} and asserts. A Java
 * handler that threw during the run fails the test ({@link KpemuExtension}).
 *
 * <pre>{@code
 * @KpemuTest(arch = Arch.ARM64, kernel = "debian:trixie", command = {"cat", "/nope"})
 * void openOfAMissingFile(KpemuSession s) { ... s.run() ... }
 * }</pre>
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@ExtendWith(KpemuExtension.class)
@Test
public @interface KpemuTest {
    Arch arch() default Arch.X86_64;

    /** As {@code --kernel}: {@code debian}, {@code debian:SUITE[@RELEASE]} or a file. */
    String kernel() default "debian";

    /** A command to run in kpemu's busybox guest (none: the default guest's workload). */
    String[] command() default {};

    /** The guest-time limit in seconds. */
    double timeoutSeconds() default 60;

    int memoryMiB() default 256;

    /**
     * Virtual CPUs, 1 to 8 ({@code kpemu boot --cpus}; {@link dev.kpemu.api.KpemuSession.Builder#cpus}).
     * They run in turn on one host thread on the schedule {@link #schedSeed} names.
     */
    int cpus() default 1;

    /** The seed naming the vCPUs' interleaving ({@code --sched-seed}; 0: the default round-robin). */
    long schedSeed() default dev.kpemu.machine.Schedule.DEFAULT_SEED;

    /** kprobe_events definitions to register with the Java probes. */
    String[] events() default {};
}
