package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.KernelRelease;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * The differential tester ({@code kpemu fuzz}, issue 32): random sets of definitions from a seed
 * ({@link CorpusGenerator}, one generator seed per set drawn from the run's seed), each answered by
 * Linux's own kprobe_events under QEMU ({@link LinuxFuzzRun}) and by kpemu ({@link KpemuFuzzRun})
 * on the same kernel and the same corpus guest, compared ({@link FuzzComparison}); a set that
 * differs is run under QEMU once more (Linux's own flakiness) and each difference classified
 * ({@link FuzzClassifier}); the first set of each new class is shrunk ({@link FuzzShrinker}) and
 * written as a reproduction ({@link FuzzReport}).
 */
public final class Fuzzer {
    /**
     * A run's settings.
     *
     * @param seconds      stop starting sets after this many seconds (0: no limit)
     * @param sets         stop after this many sets (0: no limit)
     * @param setSize      definitions per set (the generator groups 2 to 6 per function, so a set may hold a few more), the markers aside
     * @param shrinkBoots  trials the shrinker may spend on each new class
     */
    public record Config(Arch arch, KernelChoice kernel, long seed, long seconds, int sets, int setSize, Path out,
                         boolean includeLeftOut, int shrinkBoots) {}

    /** One set's outcome. */
    public record SetResult(int index, long generatorSeed, List<String> definitions, FuzzComparison.Result comparison,
                            List<FuzzClassifier.Classified> classified) {}

    /** A class: its first instance, the sets it showed in, the reproduction's directory. */
    public record DifferenceClass(FuzzClassifier.Classified first, List<Integer> sets, Path reproduction) {}

    /** The run's figures and classes. */
    public record Summary(Config config, String release, int sets, int definitions, long linuxEvents, long kpemuEvents, int identicalSets,
                          Map<String, DifferenceClass> classes) {
        public double identicalShare() { return sets == 0 ? 0 : (double) identicalSets / sets; }

        public List<DifferenceClass> of(FuzzClassifier.Category c) {
            return classes.values().stream().filter(k -> k.first().category() == c).toList();
        }
    }

    /** Linux's guest waits this long after enabling its events ({@link CorpusGuest#archive(byte[], String, List, List, boolean, int)}). */
    static final int SETTLE_SECONDS = 2;

    private final Config config;
    private final PrintWriter progress;
    private final Path root, kernel, qemuKernel, work;
    private final String release, kernelOption;
    private final byte[] busybox;
    private final CorpusGenerator generator;
    private final Map<String, Long> surveyOutside = new HashMap<>(), surveyCalls = new HashMap<>();
    private final Path kpemuInitramfs;

    public Fuzzer(Config config, PrintWriter progress) throws Exception {
        this.config = config;
        this.progress = progress;
        root = NativeLibraries.repositoryRoot();
        if (root == null) throw new KernelImageException("kpemu's repository (guest-images/fuzz-reference.sh, the surveys) was not found; set -Dkpemu.root");
        GuestImages images = GuestImages.forRepository();
        Arch arch = config.arch();
        kernel = images.kernel(arch, config.kernel());
        qemuKernel = arch == Arch.X86_64 && config.kernel() instanceof KernelChoice.Debian d ? images.vmlinux(arch, d) : kernel;
        release = config.kernel() instanceof KernelChoice.Debian d ? images.kernelVersion(arch, d).get("release")
                : KernelRelease.of(Files.readAllBytes(kernel)).orElse("?");
        kernelOption = config.kernel() instanceof KernelChoice.Debian d ? d.toString() : kernel.toString();
        Path survey = root.resolve("guest-images/reference").resolve(arch.linuxName()).resolve(ReferenceTrace.series(release)).resolve("corpus.survey");
        if (!Files.exists(survey)) {
            throw new KernelImageException("no function survey for " + release + " (" + survey + "): record it with guest-images/record-corpus.sh --kernel "
                    + kernelOption + " " + arch.linuxName());
        }
        List<String> surveyLines = Files.readAllLines(survey);
        for (String l : surveyLines) {
            if (l.startsWith("#") || l.isBlank()) continue;
            String[] f = l.trim().split("\\s+");
            surveyCalls.put(f[0], Long.parseLong(f[1]));
            surveyOutside.put(f[0], Long.parseLong(f[2]));
        }
        generator = CorpusGenerator.forKernel(arch, config.kernel(), surveyLines, config.includeLeftOut()).fuzzRules();
        busybox = Files.readAllBytes(images.busybox(arch));
        work = Files.createDirectories(config.out().resolve("work"));
        kpemuInitramfs = CorpusGuest.archive(busybox, "kpemu", List.of()).write(work.resolve("kpemu.cpio"));
    }

    public String release() { return release; }

    /** Runs sets until the time or the number of sets is reached; writes the summary. */
    public Summary run() throws Exception {
        long start = System.nanoTime();
        Random seeds = new Random(config.seed());
        Map<String, DifferenceClass> classes = new LinkedHashMap<>();
        int sets = 0, defs = 0, identical = 0;
        long linuxEvents = 0, kpemuEvents = 0;
        FuzzReport report = new FuzzReport(config.out());
        while ((config.sets() <= 0 || sets < config.sets())
                && (config.seconds() <= 0 || System.nanoTime() - start < config.seconds() * 1_000_000_000L)) {
            long setSeed = seeds.nextLong();
            List<String> all = CorpusGenerator.definitions(generator.generate(setSeed, config.setSize()).lines().toList());
            SetResult r = runSet(sets, setSeed, all);
            sets++;
            defs += all.size() - 2;
            linuxEvents += r.comparison().linuxEvents();
            kpemuEvents += r.comparison().kpemuEvents();
            if (r.classified().isEmpty()) identical++;
            Set<String> newKeys = new LinkedHashSet<>();
            for (FuzzClassifier.Classified c : r.classified()) {
                DifferenceClass k = classes.get(c.key());
                if (k == null) {
                    classes.put(c.key(), new DifferenceClass(c, new ArrayList<>(List.of(r.index())), null));
                    newKeys.add(c.key());
                } else if (!k.sets().contains(r.index())) {
                    k.sets().add(r.index());
                }
            }
            progress.printf("kpemu fuzz: set %d (generator seed %d): %d definitions, Linux %d events, kpemu %d: %s%n", r.index(), setSeed,
                    all.size() - 2, r.comparison().linuxEvents(), r.comparison().kpemuEvents(),
                    r.classified().isEmpty() ? "identical" : r.classified().size() + " difference(s), " + newKeys.size() + " new class(es)");
            for (String key : newKeys) {
                DifferenceClass k = classes.get(key);
                Path dir = reproduce(report, new ArrayList<>(classes.keySet()).indexOf(key) + 1, k.first(), r);
                classes.put(key, new DifferenceClass(k.first(), k.sets(), dir));
                progress.printf("kpemu fuzz:   %s: %s -> %s%n", k.first().category().label(), k.first().difference(), dir);
            }
            progress.flush();
        }
        Summary s = new Summary(config, release, sets, defs, linuxEvents, kpemuEvents, identical, classes);
        report.summary(s);
        return s;
    }

    /** One set: both machines, the comparison, Linux once more when they differ, the classes. */
    SetResult runSet(int index, long setSeed, List<String> definitions) throws Exception {
        Pair p = runBoth(index + "", definitions);
        FuzzComparison.Result cmp = p.comparison();
        List<FuzzClassifier.Classified> classified = new ArrayList<>();
        if (!p.linux().finished() || !p.kpemu().finished()) {
            FuzzDifference d = !p.kpemu().finished()
                    ? new FuzzDifference("boot", "", "", "finished", p.linux().finished() ? "finished" : p.linux().failure(), p.kpemu().failure(), -1)
                    : new FuzzDifference("boot", "", "", "finished", p.linux().failure(), "finished", -1);
            FuzzClassifier.Classified c = p.kpemu().finished()
                    ? new FuzzClassifier.Classified(FuzzClassifier.Category.LINUX_FLAKY, "Linux's boot under QEMU did not finish: " + p.linux().failure(),
                            "linux-flaky | boot | finished | ", d)
                    : FuzzClassifier.classify(d, FuzzClassifier.Evidence.NONE);
            return new SetResult(index, setSeed, definitions, cmp, List.of(c));
        }
        if (cmp.identical()) return new SetResult(index, setSeed, definitions, cmp, classified);
        FuzzRun again = linux(index + "-again", definitions);
        List<FuzzDifference> second = again.finished()
                ? FuzzComparison.compare(config.arch(), release, definitions, p.linux(), again).differences() : List.of();
        FuzzClassifier.Evidence ev = new FuzzClassifier.Evidence(second, surveyOutside, surveyCalls, generator.leftOut());
        Set<String> keys = new LinkedHashSet<>();
        for (FuzzDifference d : cmp.differences()) {
            FuzzClassifier.Classified c = FuzzClassifier.classify(d, ev);
            if (keys.add(c.key())) classified.add(c);
        }
        return new SetResult(index, setSeed, definitions, cmp, classified);
    }

    record Pair(FuzzRun linux, FuzzRun kpemu, FuzzComparison.Result comparison, Path events) {}

    private Pair runBoth(String name, List<String> definitions) throws Exception {
        FuzzRun linux = linux(name, definitions);
        Path events = work.resolve("set-" + name + ".events");
        Files.write(events, definitions);
        FuzzRun kpemu = KpemuFuzzRun.run(config.arch(), kernel, kernelOption, kpemuInitramfs, definitions, events, work.resolve("kpemu.snapshot"));
        FuzzComparison.Result cmp = linux.finished() && kpemu.finished()
                ? FuzzComparison.compare(config.arch(), release, definitions, linux, kpemu)
                : new FuzzComparison.Result(List.of(), 0, 0, 0);
        return new Pair(linux, kpemu, cmp, events);
    }

    private FuzzRun linux(String name, List<String> definitions) throws IOException, InterruptedException {
        Path initramfs = CorpusGuest.archive(busybox, "linux", definitions, List.of(), false, SETTLE_SECONDS).write(work.resolve("linux-" + name + ".cpio"));
        return LinuxFuzzRun.run(root, config.arch(), qemuKernel, initramfs, work.resolve("linux-" + name + ".console"));
    }

    /** Shrinks the set to the fewest definitions that still show the class, then writes the reproduction. */
    private Path reproduce(FuzzReport report, int number, FuzzClassifier.Classified c, SetResult set) throws Exception {
        List<String> markers = set.definitions().subList(0, 2), body = set.definitions().subList(2, set.definitions().size());
        List<String> first = body.contains(c.difference().definition()) ? List.of(c.difference().definition()) : List.of();
        int[] trial = {0};
        FuzzShrinker.Result<String> shrunk = c.category() == FuzzClassifier.Category.LINUX_FLAKY || c.difference().kind().equals("boot")
                ? new FuzzShrinker.Result<>(body, 0, false)
                : FuzzShrinker.shrink(body, first, sub -> {
                    try {
                        List<String> defs = new ArrayList<>(markers);
                        defs.addAll(sub);
                        Pair p = runBoth(set.index() + "-shrink" + (trial[0]++), defs);
                        if (!p.linux().finished() || !p.kpemu().finished()) return false;
                        FuzzClassifier.Evidence ev = new FuzzClassifier.Evidence(null, surveyOutside, surveyCalls, generator.leftOut());
                        return p.comparison().differences().stream().anyMatch(d -> FuzzClassifier.classify(d, ev).key().equals(c.key()));
                    } catch (Exception e) {
                        return false;
                    }
                }, config.shrinkBoots());
        List<String> defs = new ArrayList<>(markers);
        defs.addAll(shrunk.items());
        Pair p = runBoth(set.index() + "-repro" + number, defs);
        return report.reproduction(number, c, set, defs, shrunk, p.linux(), p.kpemu(), p.events(), kpemuInitramfs, config.arch());
    }
}
