package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.api.FaultExploration;
import dev.kpemu.api.KpemuException;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.fail.ErrorInjectionList;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu faults}: every failure point of a command ({@link FaultExploration}): the calls of
 * the selected error-injectable functions its tasks make, each made to fail in its own run from the
 * machine kept at the command's exec, as a table (text or JSON lines) with the command line that reproduces each
 * row; {@code --shard I/N} runs a part, {@code --merge} joins the parts' JSON.
 */
@Command(name = "faults", mixinStandardHelpOptions = true,
        description = {"Fail each call of the kernel's error-injectable functions a command makes, one run each from a snapshot,",
                "and print what the command and the kernel did (docs/fault-injection.md)."},
        footer = {"", "Example: kpemu faults --arch x86_64 --fail-sites '__x64_sys_openat' -- sh -c 'echo hi > /tmp/f; cat /tmp/f'",
                "", "Exit codes: 0 the table was made (whatever the rows say), 1 error (the command's program never ran),",
                "2 usage (bad option, glob, shard, no site matches, a --merge file that is not kpemu faults' JSON)."})
final class FaultsCommand implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper();

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Option(names = "--arch", paramLabel = "ARCH", description = "x86_64 or arm64 (not with --merge)")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL, description = "kernel to boot: " + KernelOption.HELP)
    String kernel;

    @Option(names = "--fail-sites", paramLabel = "GLOB",
            description = "the functions to fail: those of the kernel's error-injection list this shell glob matches (repeatable: any of them; default: all)")
    List<String> sites = new ArrayList<>();

    @Option(names = "--format", paramLabel = "FORMAT", defaultValue = "text", description = "text (default) or json (one object a row and line)")
    String format;

    @Option(names = "--shard", paramLabel = "I/N", description = "run only the rows whose index %% N == I-1 (from 1); join the parts with --merge")
    String shard;

    @Option(names = "--jobs", paramLabel = "N", description = "runs in parallel (default: the host's cores)")
    Integer jobs;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "60", description = "guest-time limit of each run (default ${DEFAULT-VALUE})")
    double timeout;

    @Option(names = "--merge", paramLabel = "FILE", arity = "1..*", description = "join the JSON of shards into one table (no run)")
    List<Path> merge = new ArrayList<>();

    @Parameters(paramLabel = "CMD", arity = "0..*", description = "after --: the command (its program, not a shell builtin)")
    List<String> command = new ArrayList<>();

    @Override public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (!format.equals("text") && !format.equals("json")) throw usage("--format takes text or json, not '" + format + "'");
        if (!merge.isEmpty()) {
            if (!command.isEmpty() || arch != null || shard != null) throw usage("--merge takes only files (and --format)");
            List<FaultExploration.Row> rows = new ArrayList<>();
            for (Path f : merge) {
                try {
                    rows.addAll(read(f));
                } catch (NoSuchFileException e) {
                    throw usage("no such file: " + f);
                }
            }
            rows.sort(Comparator.comparingInt(FaultExploration.Row::index));
            for (int i = 1; i < rows.size(); i++)
                if (rows.get(i).index() == rows.get(i - 1).index()) throw usage("row " + rows.get(i).index() + " is in two of the files");
            print(out, rows);
            return ExitCodes.OK;
        }
        if (arch == null) throw usage("--arch is needed (x86_64 or arm64)");
        if (command.isEmpty()) throw usage("a command is needed after --");
        Arch a = ArchOption.one(spec, arch);
        KernelChoice choice = KernelOption.parse(spec, kernel);
        int[] part = shard(shard);
        if (jobs != null && jobs < 1) throw usage("--jobs must be at least 1");
        if (!(timeout > 0)) throw usage("--timeout must be positive");
        if (sites.isEmpty()) sites.add("*");
        List<Pattern> globs = new ArrayList<>();
        for (String g : sites) {
            try {
                globs.add(ProbeGlob.pattern(g));
            } catch (IllegalArgumentException e) {
                throw usage("bad glob '" + g + "': " + e.getMessage());
            }
        }
        var list = ErrorInjectionCheck.listFor(choice, a);
        if (list.isEmpty()) throw usage("no error-injection list is known for this kernel (recorded for Debian's 6.1, 6.12 and 7.2 series)");
        Map<String, ErrorInjectionList.EType> selected = new LinkedHashMap<>();
        list.get().all().forEach((f, t) -> { if (globs.stream().anyMatch(g -> g.matcher(f).matches())) selected.put(f, t); });
        if (selected.isEmpty()) throw usage("no function of the kernel's error-injection list matches " + String.join(" or ", sites));
        var b = FaultExploration.builder().arch(a).kernel(kernel == null ? choice.toString() : kernel).command(command).sites(selected)
                .shard(part[0], part[1]).timeoutSeconds(timeout).snapshotNotices(line -> { err.println(line); err.flush(); });
        if (jobs != null) b.jobs(jobs);
        FaultExploration.Result r;
        try {
            r = b.build().run(row -> { });
        } catch (KpemuException e) {
            err.println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        List<Long> ready = r.forkReadyNanos().stream().sorted().toList(), cpu = r.forkReadyCpuNanos().stream().sorted().toList();
        err.printf("kpemu: faults: the command's task is pid %d; %d calls counted in %.2f s (snapshot point to the command's exec %.3f s);"
                        + " the machine at the command's exec kept in memory in %.2f s; %d rows run%s%n",
                r.commandPid(), r.calls().size(), r.countingHostNanos() / 1e9, r.countingReadyToExecNanos() / 1e9, r.execSnapshotNanos() / 1e9,
                r.rows().size(),
                ready.isEmpty() ? "" : String.format(" (start to the command's exec, restored, probes registered: median %.3f s, max %.3f s;"
                        + " CPU median %.3f s, max %.3f s)", ready.get(ready.size() / 2) / 1e9, ready.getLast() / 1e9,
                        cpu.get(cpu.size() / 2) / 1e9, cpu.getLast() / 1e9));
        print(out, r.rows());
        return ExitCodes.OK;
    }

    private CommandLine.ParameterException usage(String message) {
        return new CommandLine.ParameterException(spec.commandLine(), message);
    }

    private int[] shard(String s) {
        if (s == null) return new int[] {1, 1};
        var m = Pattern.compile("(\\d{1,6})/(\\d{1,6})").matcher(s);
        if (!m.matches()) throw usage("--shard takes I/N, e.g. 1/4, not '" + s + "'");
        int i = Integer.parseInt(m.group(1)), n = Integer.parseInt(m.group(2));
        if (n < 1 || i < 1 || i > n) throw usage("--shard " + s + ": I must be 1 to N");
        return new int[] {i, n};
    }

    private List<FaultExploration.Row> read(Path f) throws IOException {
        List<FaultExploration.Row> rows = new ArrayList<>();
        int n = 0;
        for (String line : Files.readAllLines(f)) {
            n++;
            if (line.isBlank()) continue;
            try {
                rows.add(JSON.readValue(line, FaultExploration.Row.class));
            } catch (JsonProcessingException e) {
                throw usage(f + ":" + n + ": not a row of kpemu faults --format json (" + e.getOriginalMessage() + ")");
            }
        }
        return rows;
    }

    private void print(PrintWriter out, List<FaultExploration.Row> rows) throws JsonProcessingException {
        if (format.equals("json")) {
            for (FaultExploration.Row r : rows) out.println(JSON.writeValueAsString(r));
        } else {
            out.printf("%-5s %-28s %4s %6s %-10s %-6s %s%n", "ROW", "FUNCTION", "N", "RETVAL", "OUTCOME", "EXIT", "FIRST LINE OF OUTPUT");
            for (FaultExploration.Row r : rows) {
                out.printf("%-5d %-28s %4d %6d %-10s %-6s %s%n", r.index(), r.function(), r.nth(), r.retval(), r.outcome(),
                        r.exit() == null ? "-" : r.exit().toString(), r.firstLine());
                if (r.injected() != 1) out.println("      injected: " + r.injected() + " (the counted call did not come again as counted)");
                out.println("      stack: " + String.join(" < ", r.stack()));
                out.println("      kernel: " + (r.kernelMessages().isEmpty() ? "-" : String.join(" | ", r.kernelMessages())));
                out.println("      reproduce: " + r.reproduce());
            }
        }
        out.flush();
    }
}
