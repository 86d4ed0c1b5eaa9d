package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * Which enabled probes Linux jump-optimizes on x86-64: {@code kprobes/list}'s {@code [OPTIMIZED]}
 * (and {@code [FTRACE]}) for a seeded sample of instruction boundaries — anywhere, just before a
 * {@code lock} prefix of {@code .smp_locks}, an alternative site, an exception-table instruction, at and
 * after an instruction Capstone 5.0 does not decode (serialize, pvalidate, UD1 with its ModRM, ...)
 * ({@code kpemu corpus optimized-sites}) — recorded under QEMU with one CPU on each pinned kernel
 * ({@code record-error-log.sh --kprobes-list --kernel debian:SUITE@RELEASE x86_64 optimized}).
 * kpemu, writing and enabling each definition on the running kernel as the recording did, must
 * list each probe as Linux does.
 */
@Tag("kernel")
class OptimizedSitesTest {
    private static final Arch ARCH = Arch.X86_64;

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"bookworm", "trixie", "sid"})
    void enabledProbesAreOptimizedWhereLinuxOptimizesThem(String suite) throws Exception {
        RecordedErrorLog recorded = RegistrationPoint.recorded(ARCH, suite, "optimized");
        long optimized = recorded.answers().stream().filter(a -> a.kprobesList().stream().anyMatch(l -> l.contains("[OPTIMIZED]"))).count();
        long plain = recorded.answers().stream().filter(a -> a.accepted() && a.kprobesList().stream().noneMatch(l -> l.contains("[OPTIMIZED]"))).count();
        assertTrue(optimized >= 20 && plain >= 20, "the sample has both answers: " + optimized + " optimized, " + plain + " not");

        List<String> wrong = new ArrayList<>();
        RegistrationPoint.run(ARCH, GuestImages.forRepository().kernel(ARCH, RecordedKernels.choice(suite)), traced -> listEach(traced, recorded, wrong));
        assertTrue(wrong.isEmpty(), wrong.size() + " of " + recorded.answers().size() + " listed otherwise:\n" + String.join("\n", wrong));
    }

    private static String verdicts(TracedBoot traced) {
        return traced.optimizer() == null ? "no optimizer" : traced.optimizer().verdicts().values().toString();
    }

    /** Each accepted definition written alone, enabled, and kprobes/list read, as record-error-log.sh's init does. */
    private static void listEach(TracedBoot traced, RecordedErrorLog recorded, List<String> wrong) {
        EventEngine events = traced.events();
        for (RecordedErrorLog.Answer want : recorded.answers()) {
            try {
                events.truncate();
                events.write(want.definition());
            } catch (ProbeSyntaxException e) {
                if (want.accepted()) wrong.add(want.definition() + ": Linux accepts, kpemu refuses: " + e.getMessage());
                continue;
            }
            if (!want.accepted()) {
                wrong.add(want.definition() + ": Linux refuses with " + want.errno() + ", kpemu accepts");
                continue;
            }
            events.enableAll();
            List<String> got = events.kprobes().list().lines().toList();
            events.disableAll();
            if (!got.equals(want.kprobesList()))
                wrong.add(want.definition() + ": Linux lists " + want.kprobesList() + ", kpemu " + got + " (" + verdicts(traced) + ")");
        }
        try {
            events.truncate();
        } catch (ProbeSyntaxException e) {
            throw new AssertionError(e);
        }
    }
}
