package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * The API's snapshots ({@link KpemuSession.Builder#snapshot}) on Debian 12's kernel, the build
 * the references were recorded on: a cold session (probes registered just before /init), a
 * session that saves its machine there and a session started from that file are one run — the
 * same kprobe_events trace, timestamps included, the same Java probe hits and the same guest time
 * at power-off — on both arches, and the restored session's trace equals Linux's own for the
 * recorded {@code open} script (guest-images/reference, recorded under QEMU). A snapshot of another
 * boot (another memory size) is refused in one line.
 */
@Tag("kernel")
class SessionSnapshotTest {
    static final Path REFERENCE = NativeLibraries.repositoryRoot().resolve("guest-images/reference");
    static final String KERNEL = "debian:bookworm@6.1.0-56";

    record Run(SessionResult result, List<String> trace, long javaHits, String console, List<String> notices) {}

    static Run session(Arch arch, List<String> definitions, Path snapshot) {
        return session(arch, definitions, snapshot, null);
    }

    static Run session(Arch arch, List<String> definitions, Path snapshot, Duration at) {
        return session(arch, definitions, snapshot, at, 1, 0);
    }

    static Run session(Arch arch, List<String> definitions, Path snapshot, Duration at, int cpus, long seed) {
        List<String> notices = new ArrayList<>();
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        KpemuSession.Builder b = KpemuSession.builder().arch(arch).kernel(KERNEL).events(definitions.toArray(String[]::new))
                .console(console).snapshotNotices(notices::add);
        if (cpus > 1) b.cpus(cpus).schedSeed(seed);
        if (snapshot == null) b.armAtInit(true);
        else b.snapshot(snapshot);
        if (at != null) b.snapshotAt(at);
        KpemuSession s = b.build();
        AtomicLong hits = new AtomicLong();
        s.register(Kprobe.on("do_sys_openat2").pre(ctx -> hits.incrementAndGet()));
        SessionResult r = s.run();
        r.assertNoHandlerFailures();
        return new Run(r, r.traceLines(), hits.get(), console.toString(StandardCharsets.ISO_8859_1), notices);
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void sessionFromAnApiSavedSnapshotTracesAsAColdOne(Arch arch) throws Exception {
        Map<String, String> v = GuestImages.forRepository().kernelVersion(arch, (KernelChoice.Debian) KernelChoice.parse(KERNEL));
        ReferenceTrace reference = ReferenceTrace.read(REFERENCE, arch, "open", v.get("release"));
        Path dir = Files.createTempDirectory("kpemu-api-snapshot");
        Path file = dir.resolve("session.snapshot");
        try {
            Run cold = session(arch, reference.definitions(), null);
            Run saving = session(arch, reference.definitions(), file);
            Run restored = session(arch, reference.definitions(), file);
            for (Run r : List.of(cold, saving, restored)) assertEquals(Outcome.POWERED_OFF, r.result().outcome(), r.result().status());
            assertNull(cold.result().snapshot());
            assertNotNull(saving.result().snapshot());
            assertFalse(saving.result().snapshot().restored(), "the first snapshot session boots cold and saves: " + saving.notices());
            assertEquals(file, saving.result().snapshot().file(), "saved: " + saving.notices());
            assertTrue(restored.result().snapshot().restored(), "the second starts from the file: " + restored.notices());
            assertTrue(saving.console().length() > restored.console().length() + 10_000, "the restored guest does not boot the kernel again");

            assertTrue(restored.trace().size() > 20, "the workload hits the probes: " + restored.trace().size());
            assertEquals(cold.trace(), saving.trace(), "the saving session's trace, timestamps included");
            assertEquals(cold.trace(), restored.trace(), "the restored session's trace, timestamps included");
            assertTrue(cold.javaHits() > 0, "the Java probe is hit");
            assertEquals(cold.javaHits(), restored.javaHits(), "the Java probe's hits");
            assertEquals(cold.javaHits(), saving.javaHits(), "the Java probe's hits");
            assertEquals(cold.result().guestNanos(), restored.result().guestNanos(), "guest time at power-off");

            TraceComparator.Result cmp = TraceComparator.compare(reference, restored.trace(), v.get("release"), v.get("version"));
            assertTrue(cmp.matches(), arch + ": " + cmp.report());

            // another boot (another memory size) refuses the file in one line
            KpemuSession other = KpemuSession.builder().arch(arch).kernel(KERNEL).memoryMiB(320).snapshot(file).build();
            KpemuException e = assertThrows(KpemuException.class, other::run);
            assertTrue(e.getMessage().startsWith("snapshot " + file + " was taken of another machine: memory MiB is '256'"), e.getMessage());
            assertFalse(e.getMessage().contains("\n"), e.getMessage());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    /**
     * A session of two CPUs on a seeded schedule (issue 26): cold, saving and restored are one run —
     * the trace with its cpu column and timestamps, the Java probe's hits, the guest time at power-off.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aSessionOfTwoCpusFromItsSnapshotTracesAsAColdOne(Arch arch) throws Exception {
        Map<String, String> v = GuestImages.forRepository().kernelVersion(arch, (KernelChoice.Debian) KernelChoice.parse(KERNEL));
        ReferenceTrace reference = ReferenceTrace.read(REFERENCE, arch, "open", v.get("release"));
        Path dir = Files.createTempDirectory("kpemu-api-snapshot");
        Path file = dir.resolve("smp.snapshot");
        try {
            Run cold = session(arch, reference.definitions(), null, null, 2, 7);
            Run saving = session(arch, reference.definitions(), file, null, 2, 7);
            Run restored = session(arch, reference.definitions(), file, null, 2, 7);
            for (Run r : List.of(cold, saving, restored)) assertEquals(Outcome.POWERED_OFF, r.result().outcome(), r.result().status());
            assertTrue(saving.console().contains("smp: Brought up 1 node, 2 CPUs"), saving.console());
            assertEquals(file, saving.result().snapshot().file(), "saved: " + saving.notices());
            assertTrue(restored.result().snapshot().restored(), "started from the file: " + restored.notices());
            assertTrue(restored.trace().size() > 20, "the workload hits the probes: " + restored.trace().size());
            assertEquals(cold.trace(), saving.trace(), "the saving session's trace, timestamps included");
            assertEquals(cold.trace(), restored.trace(), "the restored session's trace, timestamps included");
            assertTrue(cold.javaHits() > 0, "the Java probe is hit");
            assertEquals(cold.javaHits(), restored.javaHits(), "the Java probe's hits");
            assertEquals(cold.result().guestNanos(), restored.result().guestNanos(), "guest time at power-off");
            assertEquals(cold.console(), saving.console(), "the cold session's console");
            assertTrue(saving.console().endsWith(restored.console()), "console from the snapshot point on");
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    /**
     * A snapshot at a guest time the user chose (50 ms: before the fs initcalls, where the probes
     * are registered as {@code kprobe_event=} registers them): the session started from it runs as
     * the saving one, and its trace is Linux's own; a point after the registration (probes
     * attached) is refused with a notice and the session goes on without a snapshot.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void snapshotAtAGuestTimeBeforeTheProbes(Arch arch) throws Exception {
        Map<String, String> v = GuestImages.forRepository().kernelVersion(arch, (KernelChoice.Debian) KernelChoice.parse(KERNEL));
        ReferenceTrace reference = ReferenceTrace.read(REFERENCE, arch, "open", v.get("release"));
        Path dir = Files.createTempDirectory("kpemu-api-snapshot");
        Path file = dir.resolve("early.snapshot"), late = dir.resolve("late.snapshot");
        try {
            Run saving = session(arch, reference.definitions(), file, Duration.ofMillis(50));
            Run restored = session(arch, reference.definitions(), file, Duration.ofMillis(50));
            assertEquals(Outcome.POWERED_OFF, saving.result().outcome(), saving.result().status());
            assertEquals(Outcome.POWERED_OFF, restored.result().outcome(), restored.result().status());
            assertEquals(file, saving.result().snapshot().file(), "saved: " + saving.notices());
            assertFalse(saving.result().snapshot().restored());
            assertTrue(restored.result().snapshot().restored(), "started from the file: " + restored.notices());
            assertTrue(restored.trace().size() > 20, "the workload hits the probes: " + restored.trace().size());
            assertEquals(saving.trace(), restored.trace(), "the saving session's trace, timestamps included");
            assertEquals(saving.javaHits(), restored.javaHits(), "the Java probe's hits");
            assertEquals(saving.result().guestNanos(), restored.result().guestNanos(), "guest time at power-off");
            TraceComparator.Result cmp = TraceComparator.compare(reference, restored.trace(), v.get("release"), v.get("version"));
            assertTrue(cmp.matches(), arch + ": " + cmp.report());

            // at another point the file is of another boot
            KpemuException e = assertThrows(KpemuException.class,
                    () -> KpemuSession.builder().arch(arch).kernel(KERNEL).snapshot(file).build().run());
            assertTrue(e.getMessage().contains("point is 'guest time >= 50000000 ns', this boot's 'run_init_process'"), e.getMessage());

            // after the registration point the probes are attached: no snapshot, the session goes on
            Run after = session(arch, reference.definitions(), late, Duration.ofMillis(1500));
            assertEquals(Outcome.POWERED_OFF, after.result().outcome(), after.result().status());
            assertNull(after.result().snapshot().file(), "not saved: " + after.notices());
            assertFalse(Files.exists(late));
            assertTrue(after.notices().stream().anyMatch(n -> n.contains("with probes attached")), after.notices().toString());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(late);
            Files.deleteIfExists(dir);
        }
    }
}
