package dev.kpemu.junit;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.provider.ArgumentsSource;

import dev.kpemu.machine.Arch;

/**
 * Parameterizes a {@code @ParameterizedTest} over architectures × kernels: one invocation per
 * pair, each given a fresh {@link dev.kpemu.api.KpemuSession} (named "x86_64 debian:bookworm").
 * A Java handler that threw during the run fails that invocation ({@link KpemuExtension}).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@ArgumentsSource(KpemuSessionsProvider.class)
@ExtendWith(KpemuExtension.class)
public @interface KpemuSource {
    Arch[] arch() default {Arch.X86_64, Arch.ARM64};

    String[] kernel() default {"debian"};

    String[] command() default {};

    double timeoutSeconds() default 60;

    int memoryMiB() default 256;

    /** Virtual CPUs, as {@link KpemuTest#cpus()}. */
    int cpus() default 1;

    /** The schedule's seed, as {@link KpemuTest#schedSeed()}. */
    long schedSeed() default dev.kpemu.machine.Schedule.DEFAULT_SEED;

    String[] events() default {};
}
