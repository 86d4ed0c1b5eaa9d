package dev.kpemu.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu bench job} (issue 30): the probed job, kpemu against QEMU TCG running Linux's own
 * kprobes in the guest. The guest ({@code guest-images/reference/job.init}) loops
 * {@code cat /proc/version}, a write of a file in /tmp and a {@code cat} of it, {@code ROUNDS}
 * times, on the same kernel, initramfs, command line and RAM on both machines ({@link GuestBench}'s
 * processes and measure). Probed runs: QEMU's init writes the definitions
 * ({@code guest-images/reference/job.ARCH.events}, every glob written out by {@link JobDefinitions})
 * to tracefs, enables them, runs the job, stops tracing, reads {@code trace} once and prints the
 * number of event lines; kpemu registers the file's definitions host-side when /init starts
 * ({@code --from-init}) and writes its trace to a file, whose event lines are counted. Plain runs
 * (no definitions) are each machine's baseline. Each round runs the four (QEMU and kpemu, plain and
 * probed), the machine that starts alternating by round; unless {@code zeroRounds} is off, first the
 * same four at 0 rounds, for the marginal cost of an event ({@link JobFigures}).
 */
final class JobBench {
    /** Each machine's pairs ({@link JobFigures}), with the probes each side registered. */
    record Result(Arch arch, String release, long rounds, int probes, Map<GuestBench.Machine, JobFigures.Machine> machines) {}

    static final long ROUNDS = 300;
    private static final Pattern EVENTS = Pattern.compile("KPEMU-JOB-EVENTS (\\d+)"), OVERRUN = Pattern.compile("KPEMU-JOB-OVERRUN (\\d+)"),
            REFUSED = Pattern.compile("KPEMU-JOB-REFUSED (\\d+)");

    private JobBench() {}

    static Result run(Arch arch, long rounds, int repeat, boolean zeroRounds, PrintStream progress) throws KernelImageException, IOException {
        Setup setup = prepare(arch, progress);
        Map<GuestBench.Machine, List<JobFigures.Pair>> pairs = new EnumMap<>(GuestBench.Machine.class), empty = new EnumMap<>(GuestBench.Machine.class);
        for (GuestBench.Machine m : GuestBench.Machine.values()) {
            pairs.put(m, new ArrayList<>());
            empty.put(m, new ArrayList<>());
        }
        progress.printf("kpemu bench job: %s: kpemu runs as: %s%n", arch.linuxName(),
                kpemu(setup, commandLine(arch, rounds), true, setup.dir().resolve("kpemu-probed.log"), setup.dir().resolve("kpemu-probed.trace"))
                        .stream().map(JobBench::shellWord).collect(java.util.stream.Collectors.joining(" ")));
        for (int round = 0; round < repeat; round++) {
            List<GuestBench.Machine> order = round % 2 == 0 ? List.of(GuestBench.Machine.QEMU, GuestBench.Machine.KPEMU)
                    : List.of(GuestBench.Machine.KPEMU, GuestBench.Machine.QEMU);
            String pair = "pair " + (round + 1) + " of " + repeat;
            if (zeroRounds) pairs(setup, order, 0, pair, progress).forEach((m, p) -> empty.get(m).add(p));
            pairs(setup, order, rounds, pair, progress).forEach((m, p) -> pairs.get(m).add(p));
        }
        Map<GuestBench.Machine, JobFigures.Machine> machines = new EnumMap<>(GuestBench.Machine.class);
        pairs.forEach((m, p) -> machines.put(m, new JobFigures.Machine(p, empty.get(m))));
        return new Result(arch, setup.release(), rounds, setup.definitions(), machines);
    }

    /**
     * What every run of one arch shares: the guest's kernel release, QEMU's kernel, the job's
     * initramfs, kpemu's definitions file, the bench's cache directory and the number of
     * definitions written out for Linux.
     */
    record Setup(Arch arch, String release, Path qemuKernel, Path initramfs, Path events, Path dir, int definitions) {}

    /**
     * The job's files for {@code arch}: the definitions checked as Linux takes them (every glob
     * written out for QEMU's guest), the initramfs with the init and that listing.
     */
    static Setup prepare(Arch arch, PrintStream progress) throws KernelImageException, IOException {
        Path root = NativeLibraries.repositoryRoot();
        if (root == null) throw new KernelImageException("kpemu's repository (guest-images/reference/job.init) was not found; set -Dkpemu.root");
        ReferenceQemu.require(root, arch);
        GuestImages images = GuestImages.forRepository();
        GuestImages.Guest guest = images.guest(arch);
        Path dir = Files.createDirectories(images.cacheRoot().resolve("job-bench").resolve(arch.linuxName()));
        Path events = root.resolve("guest-images/reference/job." + arch.linuxName() + ".events");
        List<String> kpemuDefs = JobDefinitions.parse(Files.readString(events));
        List<String> linuxDefs = linuxListing(arch, guest.kernel(), events, progress);
        JobDefinitions.checkListing(kpemuDefs, linuxDefs);
        List<String> groups = JobDefinitions.groups(linuxDefs);
        progress.printf("kpemu bench job: %s: %d definitions (%d probes written out for Linux, groups %s)%n", arch.linuxName(),
                kpemuDefs.size(), linuxDefs.size(), String.join(",", groups));

        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, root.resolve("guest-images/reference/job.init"), "init", arch);
        archive.file("job.events", 0644, String.join("\n", linuxDefs) + "\n");
        Path initramfs = archive.write(dir.resolve("job.cpio"));
        Path qemuKernel = arch == Arch.X86_64 ? images.vmlinux(arch) : guest.kernel();
        return new Setup(arch, guest.release(), qemuKernel, initramfs, events, dir, linuxDefs.size());
    }

    /** One pair of runs per machine, plain then probed, {@code rounds} rounds, the machines in {@code order}. */
    private static Map<GuestBench.Machine, JobFigures.Pair> pairs(Setup setup, List<GuestBench.Machine> order, long rounds, String pair,
            PrintStream progress) throws IOException {
        Arch arch = setup.arch();
        String cmdline = commandLine(arch, rounds);
        List<String> done = List.of("KPEMU-INIT-START rounds=" + rounds, "KPEMU-JOB-WORK-DONE");
        Map<GuestBench.Machine, GuestBench.Sample> plain = new EnumMap<>(GuestBench.Machine.class);
        Map<GuestBench.Machine, JobFigures.Pair> out = new EnumMap<>(GuestBench.Machine.class);
        Path trace = setup.dir().resolve("kpemu-probed.trace");
        for (boolean probed : new boolean[] {false, true}) {
            List<GuestBench.Launch> launches = new ArrayList<>();
            for (GuestBench.Machine m : order) {
                String name = m == GuestBench.Machine.KPEMU ? "kpemu" : "QEMU";
                Path log = setup.dir().resolve(name.toLowerCase(java.util.Locale.ROOT) + (probed ? "-probed" : "-plain") + ".log");
                List<String> cmd;
                if (m == GuestBench.Machine.QEMU) {
                    cmd = GuestBench.qemu(arch, setup.qemuKernel(), setup.initramfs(), probed ? cmdline + " job_trace=1" : cmdline);
                } else {
                    cmd = kpemu(setup, cmdline, probed, log, trace);
                    Files.deleteIfExists(trace);
                }
                List<String> lines = m == GuestBench.Machine.QEMU && probed ? List.of(done.get(0), done.get(1), "KPEMU-JOB-EVENTS ") : done;
                launches.add(new GuestBench.Launch(cmd, log, lines, name, arch));
            }
            progress.printf("kpemu bench job: %s %s: kpemu and QEMU %s, %d rounds, taking turns%n", arch.linuxName(), pair,
                    probed ? "probed" : "plain", rounds);
            List<GuestBench.Sample> samples = GuestBench.measure(launches, true);
            for (int i = 0; i < order.size(); i++) {
                GuestBench.Machine m = order.get(i);
                GuestBench.Sample s = samples.get(i);
                if (!probed) {
                    plain.put(m, s);
                    continue;
                }
                String name = launches.get(i).machine();
                long n = m == GuestBench.Machine.QEMU ? qemuEvents(launches.get(i).log(), setup.definitions()) : traceLines(trace);
                if (n == 0 && rounds > 0) throw new IOException(name + " " + arch.linuxName() + ": the probed run traced no event; see " + launches.get(i).log());
                progress.printf("kpemu bench job: %s %s: %s traced %d events in %d rounds%n", arch.linuxName(), pair, name, n, rounds);
                out.put(m, new JobFigures.Pair(plain.get(m), s, n));
            }
        }
        return out;
    }

    /** The guest's command line for {@code rounds} rounds of the job. */
    static String commandLine(Arch arch, long rounds) {
        return (arch == Arch.X86_64 ? "console=ttyS0" : "console=ttyAMA0") + " nokaslr panic=-1 job_rounds=" + rounds;
    }

    /** kpemu's run as users start it ({@link GuestBench#kpemu}); probed: the definitions registered at /init, the trace to {@code trace}. */
    private static List<String> kpemu(Setup setup, String cmdline, boolean probed, Path console, Path trace) {
        List<String> cmd = GuestBench.kpemu(setup.arch(), setup.initramfs(), cmdline, console);
        if (probed) cmd.addAll(List.of("--from-init", "--events-file", setup.events().toString(), "-o", trace.toString()));
        return cmd;
    }

    /** {@code word} as a shell reads it back: in single quotes when it holds anything but plain characters. */
    static String shellWord(String word) {
        return word.matches("[A-Za-z0-9_./:=,+%@-]+") ? word : "'" + word.replace("'", "'\\''") + "'";
    }

    /** The definitions as Linux takes them: {@code kpemu check-events} on the guest's kernel, its listing. */
    private static List<String> linuxListing(Arch arch, Path kernel, Path events, PrintStream progress) throws IOException {
        StringWriter listing = new StringWriter(), errors = new StringWriter();
        picocli.CommandLine cl = Main.commandLine();
        cl.setOut(new PrintWriter(listing));
        cl.setErr(new PrintWriter(errors));
        int code = cl.execute("check-events", "--arch", arch.linuxName(), "--kernel", kernel.toString(), events.toString());
        errors.toString().lines().forEach(l -> progress.println(l));
        if (code != ExitCodes.OK) throw new IOException("the job's definitions " + events + " were refused for " + arch.linuxName() + " (exit " + code + ")");
        return listing.toString().lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
    }

    /** The event count the QEMU guest printed; its overruns or refused definitions make the run invalid. */
    private static long qemuEvents(Path log, int definitions) throws IOException {
        String console = Files.readString(log, StandardCharsets.ISO_8859_1);
        Matcher refused = REFUSED.matcher(console);
        if (refused.find() && !refused.group(1).equals("0"))
            throw new IOException("QEMU's Linux refused " + refused.group(1) + " of the " + definitions + " definitions; see " + log);
        Matcher over = OVERRUN.matcher(console);
        if (over.find() && !over.group(1).equals("0"))
            throw new IOException("QEMU's ring buffer overran (" + over.group(1) + " events lost): fewer rounds; see " + log);
        Matcher m = EVENTS.matcher(console);
        if (!m.find()) throw new IOException("QEMU's guest printed no event count; see " + log);
        return Long.parseLong(m.group(1));
    }

    /** Event lines of kpemu's trace file (the lines not starting with '#'). */
    static long traceLines(Path trace) throws IOException {
        if (!Files.exists(trace)) return 0;
        long n = 0;
        try (BufferedReader r = Files.newBufferedReader(trace, StandardCharsets.ISO_8859_1)) {
            for (String l = r.readLine(); l != null; l = r.readLine())
                if (!l.isEmpty() && !l.startsWith("#")) n++;
        }
        return n;
    }
}
