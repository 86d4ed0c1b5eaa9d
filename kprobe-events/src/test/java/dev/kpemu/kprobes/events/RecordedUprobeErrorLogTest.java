package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;

/**
 * Replays every {@code uprobe_events} definition whose answer Linux itself recorded under QEMU
 * ({@code guest-images/reference/ARCH/SERIES/uprobes.error_log}, by record-uprobes.sh, on the
 * initramfs's busybox) through kpemu's uprobe parser in the recorded kernel's dialect, against
 * the same guest files: accepted or refused alike, the same errno, the same error_log entry
 * (message, command, caret), the same uprobe_events listing. Debian 12's 6.1, 13's 6.12 and
 * unstable's 7.2, both arches; no kernel is needed.
 */
class RecordedUprobeErrorLogTest {
    static Stream<Arguments> recordings() {
        return Stream.of("6.1", "6.12", "7.2").flatMap(s -> Stream.of(Arch.values()).map(a -> Arguments.of(s, a)));
    }

    /** The guest record-uprobes.sh boots: kpemu's default initramfs with its own /init and two files. */
    static GuestFiles recorderGuest() {
        Initramfs guest = Initramfs.defaultGuest(new byte[0])
                .file("init", 0755, "#!/bin/sh\n").file("defs.txt", 0644, "").file("events.txt", 0644, "");
        return new InitramfsFiles(guest);
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("recordings")
    void everyRecordedAnswerIsKpemusAnswer(String series, Arch a) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Path file = ref.resolve(a.linuxName()).resolve(series).resolve("uprobes.error_log");
        assertTrue(Files.isRegularFile(file), "no " + file + " (guest-images/record-uprobes.sh)");
        RecordedErrorLog recorded = RecordedErrorLog.read(file);
        assertTrue(recorded.answers().size() >= 100, "a partial recording: " + recorded.answers().size() + " answers");
        assertKpemuAnswersAsLinux(recorded, a, recorderGuest());
    }

    /** Each recorded definition (written alone to an empty uprobe_events) checked by kpemu against {@code files}: Linux's answer. */
    private static void assertKpemuAnswersAsLinux(RecordedErrorLog recorded, Arch a, GuestFiles files) {
        Dialect dialect = Dialect.forRelease(recorded.kernel());
        List<String> wrong = new ArrayList<>();
        for (RecordedErrorLog.Answer want : recorded.answers()) {
            DefinitionCheck.Outcome got = new UprobeDefinitionCheck(a, dialect, files).check(want.definition());
            String diff = RecordedErrorLogTest.difference(want, got);
            if (diff != null) wrong.add("> " + want.definition() + "\n    " + diff);
        }
        assertTrue(wrong.isEmpty(), wrong.size() + " of " + recorded.answers().size() + " answers differ from Linux's ("
                + recorded.kernel() + "):\n" + String.join("\n", wrong));
    }

    /**
     * The answers for places in a shared library ({@code uprobes-dyn.error_log}, record-uprobes-dyn.sh:
     * Debian's libc6 for the arch at its Debian path, added to the same guest), against a guest with
     * the files build-uprobe-target-dyn.sh gives (the recorded ones: their sha256 is the header's).
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("recordings")
    void libraryAnswersAreKpemus(String series, Arch a) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Path file = ref.resolve(a.linuxName()).resolve(series).resolve("uprobes-dyn.error_log");
        assertTrue(Files.isRegularFile(file), "no " + file + " (guest-images/record-uprobes-dyn.sh)");
        RecordedErrorLog recorded = RecordedErrorLog.read(file);
        assertTrue(recorded.answers().size() >= 4, "a partial recording: " + recorded.answers().size() + " answers");
        Path root = ref.getParent().getParent();
        Process b = new ProcessBuilder("bash", root.resolve("guest-images/build-uprobe-target-dyn.sh").toString(), a.linuxName(),
                dev.kpemu.natives.NativeLibraries.cacheDirectory().resolve("uprobe-target-dyn/" + a.linuxName()).toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        List<String> files = new String(b.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).lines().toList();
        assertEquals(0, b.waitFor(), "guest-images/build-uprobe-target-dyn.sh " + a.linuxName());
        Initramfs guest = Initramfs.defaultGuest(new byte[0])
                .file("init", 0755, "#!/bin/sh\n").file("defs.txt", 0644, "").file("events.txt", 0644, "");
        for (String f : files) {
            String host = f.substring(0, f.indexOf(':')), inGuest = f.substring(f.indexOf(':') + 1);
            String dir = inGuest.lastIndexOf('/') <= 0 ? "" : inGuest.substring(1, inGuest.lastIndexOf('/'));
            StringBuilder made = new StringBuilder();
            for (String part : dir.isEmpty() ? new String[0] : dir.split("/")) {
                made.append(made.isEmpty() ? "" : "/").append(part);
                guest = guest.dir(made.toString(), 0755);
            }
            guest = guest.file(inGuest.substring(1), 0755, Files.readAllBytes(Path.of(host)));
        }
        assertKpemuAnswersAsLinux(recorded, a, new InitramfsFiles(guest));
    }

    @org.junit.jupiter.api.Test
    void pathsResolveAsTheKernelResolvesThem() {
        GuestFiles f = recorderGuest();
        assertEquals(new GuestFiles.Lookup(null, true, "/bin/busybox"), f.lookup("/bin/sh"));
        assertEquals(new GuestFiles.Lookup(null, true, "/bin/busybox"), f.lookup("/../bin/./sh"));
        assertEquals(new GuestFiles.Lookup(null, false, "/bin"), f.lookup("/bin/"));
        assertEquals(dev.kpemu.kprobes.Errno.ENOTDIR, f.lookup("/bin/busybox/x").errno());
        assertEquals(dev.kpemu.kprobes.Errno.ENOENT, f.lookup("/bin/none").errno());
    }
}
