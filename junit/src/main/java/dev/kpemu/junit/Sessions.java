package dev.kpemu.junit;

import java.time.Duration;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.machine.Arch;

/** Builds the sessions the annotations describe. */
final class Sessions {
    private Sessions() {}

    static KpemuSession build(Arch arch, String kernel, String[] command, double timeoutSeconds, int memoryMiB, int cpus, long schedSeed,
                              String[] events) {
        KpemuSession.Builder b = KpemuSession.builder().arch(arch).kernel(kernel).memoryMiB(memoryMiB).cpus(cpus).schedSeed(schedSeed)
                .timeout(Duration.ofNanos((long) (timeoutSeconds * 1e9))).events(events);
        if (command.length > 0) b.command(command);
        return b.build();
    }

    static KpemuSession build(KpemuTest t) {
        return build(t.arch(), t.kernel(), t.command(), t.timeoutSeconds(), t.memoryMiB(), t.cpus(), t.schedSeed(), t.events());
    }
}
