package dev.kpemu.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * kpemu's side of {@code kpemu fuzz} for N random sets in this JVM, as {@link Fuzzer} runs them
 * (the first set boots cold and saves the snapshot at /init, the others start from it), for
 * {@link FuzzSetsMemoryTest}'s bounded-heap child: {@code ARCH KERNEL SETS DIR}. Prints a line a
 * set and exits 1 on the first set that does not finish.
 */
public final class FuzzSetsInOneJvm {
    private FuzzSetsInOneJvm() {}

    public static void main(String[] args) throws Exception {
        Arch arch = Arch.parse(args[0]);
        KernelChoice.Debian kernelChoice = (KernelChoice.Debian) KernelChoice.parse(args[1]);
        int sets = Integer.parseInt(args[2]);
        Path dir = Files.createDirectories(Path.of(args[3]));
        GuestImages images = GuestImages.forRepository();
        Path kernel = images.kernel(arch, kernelChoice);
        String release = images.kernelVersion(arch, kernelChoice).get("release");
        Path survey = NativeLibraries.repositoryRoot().resolve("guest-images/reference").resolve(arch.linuxName())
                .resolve(ReferenceTrace.series(release)).resolve("corpus.survey");
        CorpusGenerator generator = CorpusGenerator.forKernel(arch, kernelChoice, Files.readAllLines(survey), false).fuzzRules();
        Path initramfs = CorpusGuest.archive(Files.readAllBytes(images.busybox(arch)), "kpemu", List.of()).write(dir.resolve("kpemu.cpio"));
        Random seeds = new Random(32);
        for (int i = 0; i < sets; i++) {
            List<String> definitions = CorpusGenerator.definitions(generator.generate(seeds.nextLong(), 12).lines().toList());
            Path events = dir.resolve("set-" + i + ".events");
            Files.write(events, definitions);
            FuzzRun r = KpemuFuzzRun.run(arch, kernel, args[1], initramfs, definitions, events, dir.resolve("kpemu.snapshot"));
            System.out.println("set " + i + ": " + r.traceLines().size() + " events" + (r.finished() ? "" : ", " + r.failure()));
            if (!r.finished()) System.exit(1);
        }
    }
}
