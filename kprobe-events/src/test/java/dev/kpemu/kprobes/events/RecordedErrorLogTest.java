package dev.kpemu.kprobes.events;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.machine.Arch;

/**
 * Replays every definition whose answer Linux itself recorded under QEMU
 * ({@code guest-images/reference/ARCH/SERIES/dialect.error_log} and {@code fprobe.error_log}, by record-error-log.sh) through kpemu's
 * check of a definition on the same kernel, in that kernel's dialect ({@link Dialect#forRelease}) with
 * its own BTF: accepted or refused alike, the same errno, the same error_log entry (message, command,
 * caret), the same kprobe_events listing. Debian 12's 6.1, 13's 6.12 and unstable's 7.x, both arches.
 */
@Tag("kernel")
class RecordedErrorLogTest {
    static java.util.stream.Stream<Arguments> kernels() {
        return java.util.stream.Stream.of("dialect", "fprobe").flatMap(n -> java.util.stream.Stream.of("bookworm", "trixie", "sid")
                .flatMap(s -> java.util.stream.Stream.of(Arch.values()).map(a -> Arguments.of(n, s, a))));
    }

    /**
     * {@code name}: {@code dialect} (kprobe_events definitions) or {@code fprobe} (fprobe and
     * tracepoint-probe definitions written to dynamic_events: on 6.1 and on a kernel without
     * CONFIG_FPROBE_EVENTS, arm64's 6.12, every one refused as no event type takes it).
     */
    @ParameterizedTest(name = "{0} {1} {2}")
    @MethodSource("kernels")
    void everyRecordedAnswerIsKpemusAnswer(String name, String suite, Arch a) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian choice = RecordedKernels.choice(suite);
        String release = images.kernelVersion(a, choice).get("release");
        Path file = ref.resolve(a.linuxName()).resolve(ReferenceTrace.series(release)).resolve(name + ".error_log");
        Assumptions.assumeTrue(Files.isRegularFile(file), "no error_log recorded for " + release + " (guest-images/record-error-log.sh)");
        RecordedErrorLog recorded = RecordedErrorLog.read(file);
        Assumptions.assumeTrue(recorded.kernel().equals(release), "recorded on " + recorded.kernel() + ", the cached kernel is " + release);
        Path kernelFile = images.kernel(a, choice);
        Kallsyms.KernelText kernel = Kallsyms.load(kernelFile);
        Dialect dialect = Dialect.forRelease(release);
        List<String> wrong = new ArrayList<>();
        try (KernelProbeSites sites = new KernelProbeSites(a, kernel.symbols(), kernel.bytes()).dialect(dialect)) {
            KallsymsSymbols symbols = KallsymsSymbols.forKernel(kernel.symbols(), a, kernel.bytes());
            if (dialect.hasBtfArgs()) symbols = symbols.withBtf(BtfLocator.read(kernelFile).btf());
            for (RecordedErrorLog.Answer want : recorded.answers()) {
                // each definition was written alone to an empty kprobe_events
                DefinitionCheck.Outcome got = new DefinitionCheck(a, dialect, symbols, sites).check(want.definition());
                String diff = difference(want, got);
                if (diff != null) wrong.add("> " + want.definition() + "\n    " + diff);
            }
        }
        assertTrue(wrong.isEmpty(), wrong.size() + " of " + recorded.answers().size() + " answers differ from Linux's:\n" + String.join("\n", wrong));
    }

    /**
     * Linux lists a probe given by address with {@code 0x%p}: the address hashed with a key drawn at
     * boot, which no other machine can reproduce; kpemu lists the address itself in the same
     * 16-digit form. Both become {@code 0x<hashed>} for the comparison.
     */
    static String unhashed(String listing) {
        return listing.replaceFirst("^([pr][0-9]*:\\S+) 0x[0-9a-f]{16}( |$)", "$1 0x<hashed>$2");
    }

    /** Null when kpemu answers as Linux did. */
    static String difference(RecordedErrorLog.Answer want, DefinitionCheck.Outcome got) {
        if (want.accepted() != got.accepted()) {
            return want.accepted() ? "Linux accepts (" + want.listing() + "); kpemu refuses: " + got.error().errorLog().replace("\n", " | ")
                    : "Linux refuses with " + want.errno() + " " + want.errorLog() + want.console() + "; kpemu accepts: " + got.listing();
        }
        if (want.accepted()) {
            if (!want.console().equals(got.console())) return "console: Linux " + want.console() + ", kpemu " + got.console();
            List<String> linux = want.listing().stream().map(RecordedErrorLogTest::unhashed).toList();
            List<String> kpemu = got.listing().stream().map(RecordedErrorLogTest::unhashed).toList();
            return linux.equals(kpemu) ? null : "listing: Linux " + want.listing() + ", kpemu " + got.listing();
        }
        ProbeSyntaxException e = got.error();
        if (want.errno() != e.errno()) return "errno: Linux " + want.errno() + ", kpemu " + e.errno() + " (" + e.getMessage() + ")";
        List<String> log = e.logged() ? List.of(e.errorLog().split("\n")) : List.of();
        if (!want.errorLog().equals(log)) return "error_log: Linux " + want.errorLog() + ", kpemu " + log;
        if (!want.console().equals(got.console())) return "console: Linux " + want.console() + ", kpemu " + got.console();
        return null;
    }
}
