package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.StopReason;
import dev.kpemu.session.TracedBoot;

/**
 * Boots a kernel to where a traced boot registers its probes (the running kernel's text, as
 * {@code kprobe_event=} would find it), hands the traced boot (its event engine, its optimizer) to a test, and stops: the way the
 * tests answer recorded tracefs writes on the running kernel as Linux's recording did.
 */
final class RegistrationPoint {
    private RegistrationPoint() {}

    /**
     * Linux's recorded answers {@code reference/ARCH/SERIES/NAME.error_log} for the pinned kernel
     * of {@code suite}, checked to be of that very build.
     */
    static RecordedErrorLog recorded(Arch arch, String suite, String name) throws java.io.IOException {
        String release = GuestImages.forRepository().kernelVersion(arch, RecordedKernels.choice(suite)).get("release");
        Path file = KernelTraceRegressionTest.REFERENCE.resolve(arch.linuxName()).resolve(ReferenceTrace.series(release)).resolve(name + ".error_log");
        RecordedErrorLog recorded = RecordedErrorLog.read(file);
        assertEquals(release, recorded.kernel(), "recorded on the kernel the test boots");
        return recorded;
    }

    static void run(Arch arch, Path kernel, Consumer<TracedBoot> atRegistration) throws Exception {
        TracedBoot traced = new TracedBoot(List.of(), null);
        boolean[] answered = {false};
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) { traced.ready(guest); }

            @Override public boolean breakpoint(LinuxGuest guest, long address) {
                boolean go = traced.breakpoint(guest, address);
                if (!answered[0] && traced.events() != null) {
                    answered[0] = true;
                    atRegistration.accept(traced);
                    guest.machine().requestStopFromAnyThread(new StopReason.HostRequest("answered"));
                }
                return go;
            }

            @Override public void finished(LinuxGuest guest) { traced.finished(guest); }
        };
        BootRunner.boot(new BootRunner.Options(arch, kernel, null, null, 256, 60, new ByteArrayOutputStream(),
                new PrintStream(new ByteArrayOutputStream())), hooks);
        assertTrue(answered[0], "the probes' registration point was reached");
    }
}
