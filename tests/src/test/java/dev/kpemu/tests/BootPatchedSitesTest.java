package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.DefinitionCheck;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.machine.Arch;

/**
 * Probes on the sites an x86 kernel rewrites while it boots — alternatives, paravirt calls,
 * retpoline, return-thunk and call-depth sites (issue 32: {@code p get_old_pud+178} on 6.1, a
 * {@code call *pv_ops(%rip)} in the file, which Linux accepts and kpemu refused). Linux decides
 * them on its patched text. Its answers to definitions at a sample of each kind of site (and to
 * the byte after each site's start and the instruction after its end) were recorded under QEMU on
 * each pinned kernel ({@code record-error-log.sh --kernel debian:SUITE@RELEASE x86_64 patched});
 * kpemu, writing each definition on the running kernel as the recording did, must answer each the
 * same (accepted with the same listing, or the same errno and error_log), and its check before
 * boot must not refuse one that Linux accepts.
 */
@Tag("kernel")
class BootPatchedSitesTest {
    private static final Arch ARCH = Arch.X86_64;

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"bookworm", "trixie", "sid"})
    void probesOnBootPatchedSitesAreAnsweredAsLinuxAnswers(String suite) throws Exception {
        GuestImages images = GuestImages.forRepository();
        RecordedErrorLog recorded = RegistrationPoint.recorded(ARCH, suite, "patched");
        String release = recorded.kernel();
        assertTrue(recorded.answers().stream().filter(RecordedErrorLog.Answer::accepted).count() >= 20, "Linux accepts sites of the sample");

        List<String> wrong = new ArrayList<>();
        Path kernel = images.kernel(ARCH, RecordedKernels.choice(suite));
        Kallsyms.KernelText kt = Kallsyms.load(kernel);
        Dialect dialect = Dialect.forRelease(release);
        KallsymsSymbols symbols = KallsymsSymbols.forKernel(kt.symbols(), ARCH, kt.bytes());
        int deferred = 0;
        try (KernelProbeSites sites = new KernelProbeSites(ARCH, kt.symbols(), kt.bytes()).dialect(dialect)) {
            for (RecordedErrorLog.Answer want : recorded.answers()) {
                DefinitionCheck.Outcome got = new DefinitionCheck(ARCH, dialect, symbols, sites).check(want.definition());
                if (want.accepted() && !got.accepted())
                    wrong.add("before boot: " + want.definition() + ": Linux accepts, kpemu refuses: " + got.error().errorLog().replace("\n", " | "));
            }
            for (KernelTextTables.Range r : KernelTextTables.read(ARCH, kt.symbols(), kt.bytes()).bootPatchedSites())
                if (sites.decidedOnRunningKernel(r.start()).isPresent()) deferred++;
        }
        assertTrue(deferred > 1000, "the kernel's boot-patched sites are known: " + deferred);

        RegistrationPoint.run(ARCH, kernel, traced -> answerOnTheRunningKernel(traced.events(), recorded, wrong));
        assertTrue(wrong.isEmpty(), wrong.size() + " of " + recorded.answers().size() + " answered otherwise:\n" + String.join("\n", wrong));
    }

    /** Each definition written alone to an empty kprobe_events, as record-error-log.sh's init writes it. */
    private static void answerOnTheRunningKernel(EventEngine events, RecordedErrorLog recorded, List<String> wrong) {
        for (RecordedErrorLog.Answer want : recorded.answers()) {
            List<String> log = List.of(), listing = List.of();
            String why = "";
            dev.kpemu.kprobes.Errno errno = null;
            try {
                events.truncate();
                events.clearErrorLog();
                events.write(want.definition());
                listing = List.of(events.listing().split("\n"));
            } catch (ProbeSyntaxException e) {
                errno = e.errno();
                log = e.logged() ? List.of(e.errorLog().split("\n")) : List.of();
                why = e.getCause() != null ? " (" + e.getCause().getMessage() + ")" : "";
            }
            if (want.accepted() != (errno == null)) {
                wrong.add("running: " + want.definition() + ": Linux " + (want.accepted() ? "accepts" : "refuses with " + want.errno() + " " + want.errorLog())
                        + ", kpemu " + (errno == null ? "accepts" : "refuses with " + errno + " " + log));
            } else if (errno != null && (errno != want.errno() || !log.equals(want.errorLog()))) {
                wrong.add("running: " + want.definition() + ": Linux " + want.errno() + " " + want.errorLog() + ", kpemu " + errno + " " + log + why);
            } else if (errno == null && !listing.equals(want.listing())) {
                wrong.add("running: " + want.definition() + ": Linux lists " + want.listing() + ", kpemu " + listing);
            }
        }
        try {
            events.truncate();
        } catch (ProbeSyntaxException e) {
            throw new AssertionError(e);
        }
    }
}
