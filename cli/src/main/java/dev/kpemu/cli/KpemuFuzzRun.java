package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.machine.snapshot.SnapshotException;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * The kpemu side of {@code kpemu fuzz}: the corpus guest in mode kpemu booted in-process through
 * the session's composition root ({@link TracedBoot}), the definitions registered right before
 * /init as {@code CorpusTraceTest} registers them (from a snapshot there after the first set). A definition kpemu refuses stops a boot before
 * the guest runs (refused by the check before boot, or when registered at /init): it is noted with its error_log message and the boot
 * starts again without it.
 */
final class KpemuFuzzRun {
    static final int MEMORY_MIB = 256;
    static final double TIMEOUT_SECONDS = 180;

    private KpemuFuzzRun() {}

    /**
     * Boots the set; {@code snapshot} (a file, or null for a cold boot): the machine at
     * run_init_process, saved by the first boot and restored by the later ones (every set boots the
     * same kernel, guest and command line; the probes are registered there, as cold).
     */
    static FuzzRun run(Arch arch, Path kernel, String kernelOption, Path initramfs, List<String> definitions, Path eventsFile,
                       Path snapshot) throws KernelImageException {
        List<String> remaining = new ArrayList<>(definitions);
        Map<String, String> refused = new LinkedHashMap<>();
        String command = "kpemu boot --arch " + arch.linuxName() + (kernelOption.isEmpty() ? "" : " --kernel " + kernelOption)
                + " --initrd " + initramfs + " --from-init --memory " + MEMORY_MIB + " --events-file " + eventsFile;
        while (true) {
            TracedBoot traced = new TracedBoot(remaining, null).armAtInit(true).optimizeDelay(Duration.ZERO);
            BootRunner.Result r;
            try {
                BootRunner.Options o = new BootRunner.Options(arch, kernel, initramfs, null, MEMORY_MIB, TIMEOUT_SECONDS,
                        new ByteArrayOutputStream(), new PrintStream(new ByteArrayOutputStream()));
                r = snapshot == null ? BootRunner.boot(o, traced) : BootRunner.boot(o, traced, BootSnapshot.file(snapshot, line -> { }));
            } catch (SnapshotException e) {
                return new FuzzRun(refused, List.of(), command, "kpemu's snapshot " + snapshot + ": " + e.getMessage());
            } catch (TracedBoot.DefinitionRejected e) {
                if (!refuse(remaining, refused, e.error())) {
                    return new FuzzRun(refused, List.of(), command, "kpemu refused a definition it cannot name: " + e.error());
                }
                continue;
            }
            // refused when registered at /init (not by the check before boot: "Probe point is not an
            // instruction boundary" needs the booted text), as Linux's write to kprobe_events; the boot
            // then stopped at the registration point
            ProbeSyntaxException atRegistration = traced.rejectedAtRegistration();
            if (atRegistration != null) {
                if (!refuse(remaining, refused, atRegistration)) {
                    return new FuzzRun(refused, List.of(), command, "kpemu refused a definition it cannot name: " + atRegistration);
                }
                continue;
            }
            List<String> lines = traced.records().stream().map(TraceRecord::line).toList();
            String failure = r.outcome() == BootOutcome.POWERED_OFF ? null : "kpemu's boot ended " + r.outcome() + ": " + r.status();
            return new FuzzRun(refused, lines, command, failure);
        }
    }

    /** Notes the definition {@code error} names as refused, with its error_log line, and drops it; false when none is named. */
    static boolean refuse(List<String> remaining, Map<String, String> refused, ProbeSyntaxException error) {
        String which = rejected(remaining, error.command());
        if (which == null) return false;
        String log = error.logged() ? error.errorLog().lines().findFirst().orElse("") : "";
        refused.put(which, log.strip());
        remaining.remove(which);
        return true;
    }

    /** The definition a refusal names (its command is the definition as written, maybe with its whitespace folded). */
    static String rejected(List<String> definitions, String command) {
        if (command == null) return null;
        String c = command.strip().replaceAll("\\s+", " ");
        for (String d : definitions) if (d.strip().replaceAll("\\s+", " ").equals(c)) return d;
        for (String d : definitions) if (d.contains(c) || c.contains(d.strip())) return d;
        return null;
    }
}
