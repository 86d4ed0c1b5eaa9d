package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import dev.kpemu.machine.Arch;

/**
 * What {@code kpemu fuzz} writes into {@code --out DIR}: {@code summary.txt} (sets, definitions,
 * events, the share of sets identical, each class with its category, reason and sets), and per class
 * {@code class-N/}: {@code definitions.events} (the shrunk set, markers first), {@code reproduce.sh}
 * (the guest archives, the exact {@code kpemu boot} command and the QEMU command), both traces and
 * {@code difference.txt}.
 */
final class FuzzReport {
    private final Path out;

    FuzzReport(Path out) throws IOException {
        this.out = Files.createDirectories(out);
    }

    Path reproduction(int number, FuzzClassifier.Classified c, Fuzzer.SetResult set, List<String> definitions,
                      FuzzShrinker.Result<String> shrunk, FuzzRun linux, FuzzRun kpemu, Path eventsFile, Path kpemuInitramfs, Arch arch)
            throws IOException {
        Path dir = Files.createDirectories(out.resolve("class-" + number));
        Files.write(dir.resolve("definitions.events"), definitions);
        String a = arch.linuxName();
        String qemu = linux.command().replaceAll("\\S*linux-[^ ]*\\.cpio", "linux.cpio");
        String boot = kpemu.command().replace(kpemuInitramfs.toString(), "kpemu.cpio").replace(eventsFile.toString(), "definitions.events");
        Files.writeString(dir.resolve("reproduce.sh"), """
                #!/bin/sh
                # kpemu fuzz: class %d (%s), from set %d (generator seed %d); shrunk from %d to %d definitions in %d trials%s.
                # %s
                set -e
                cd "$(dirname "$0")"
                kpemu corpus initramfs --arch %s --mode kpemu -o kpemu.cpio
                kpemu corpus initramfs --arch %s --mode linux --settle %d --events definitions.events -o linux.cpio
                # kpemu (the trace on stdout; compare the workload's window, CorpusGuest.window)
                %s
                # Linux's own kprobe_events under QEMU (the trace on the console between KPEMU-CORPUS-TRACE-BEGIN and -END)
                %s
                """.formatted(number, c.category().label(), set.index(), set.generatorSeed(), set.definitions().size() - 2,
                definitions.size() - 2, shrunk.trials(), shrunk.minimal() ? "" : " (the budget ran out before it was minimal)",
                c.difference().toString().replace('\n', ' '), a, a, Fuzzer.SETTLE_SECONDS, boot, qemu));
        dir.resolve("reproduce.sh").toFile().setExecutable(true);
        Files.write(dir.resolve("linux.trace"), linux.traceLines());
        Files.write(dir.resolve("kpemu.trace"), kpemu.traceLines());
        List<String> diff = new ArrayList<>();
        diff.add("category: " + c.category().label());
        diff.add("reason: " + c.reason());
        diff.add("key: " + c.key());
        diff.add("first seen: " + c.difference());
        linux.refused().forEach((d, m) -> diff.add("Linux refused: " + d + "  (" + m + ")"));
        kpemu.refused().forEach((d, m) -> diff.add("kpemu refused: " + d + "  (" + m + ")"));
        Files.write(dir.resolve("difference.txt"), diff);
        return dir;
    }

    void summary(Fuzzer.Summary s) throws IOException {
        List<String> l = new ArrayList<>();
        Fuzzer.Config c = s.config();
        l.add("kpemu fuzz --arch " + c.arch().linuxName() + " --kernel " + c.kernel() + " --seed " + c.seed()
                + (c.seconds() > 0 ? " --seconds " + c.seconds() : "") + (c.sets() > 0 ? " --sets " + c.sets() : "")
                + " --set-size " + c.setSize() + (c.includeLeftOut() ? " --include-left-out" : ""));
        l.add("kernel: " + s.release());
        l.add("sets: " + s.sets());
        l.add("definitions: " + s.definitions() + " (markers aside)");
        l.add("events (workload window): Linux " + s.linuxEvents() + ", kpemu " + s.kpemuEvents());
        l.add(String.format(Locale.ROOT, "identical sets: %d of %d (%.1f %%)", s.identicalSets(), s.sets(), 100 * s.identicalShare()));
        l.add("classes: " + s.classes().size());
        int n = 0;
        for (Fuzzer.DifferenceClass k : s.classes().values()) {
            n++;
            l.add("");
            l.add(n + ". " + k.first().category().label() + ": " + k.first().key());
            l.add("   reason: " + k.first().reason());
            l.add("   first: " + k.first().difference());
            l.add("   sets: " + k.sets());
            if (k.reproduction() != null) l.add("   reproduction: " + k.reproduction());
        }
        Files.write(out.resolve("summary.txt"), l);
    }
}
