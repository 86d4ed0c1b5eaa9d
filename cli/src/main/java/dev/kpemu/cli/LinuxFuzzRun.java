package dev.kpemu.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.machine.Arch;

/**
 * The Linux side of {@code kpemu fuzz}: one corpus guest in mode linux ({@link CorpusGuest}) under
 * QEMU, through {@code guest-images/fuzz-reference.sh} (qemu-reference.sh's invocation, the one every
 * recording uses), and what its console says: refused definitions with their error_log lines, and
 * tracefs' trace between {@link CorpusGuest#TRACE_BEGIN} and {@link CorpusGuest#TRACE_END}.
 */
final class LinuxFuzzRun {
    private static final Pattern KERNEL_LINE = Pattern.compile("^\\[ *[0-9]+\\.[0-9]+\\] .*");
    private static final Pattern LOG_TIMESTAMP = Pattern.compile("^\\[ *[0-9]+\\.[0-9]+\\] ");

    private LinuxFuzzRun() {}

    /** Boots {@code initramfs} under QEMU on {@code qemuKernel} (x86_64: the vmlinux; arm64: the Image); the console goes to {@code log}. */
    static FuzzRun run(Path root, Arch arch, Path qemuKernel, Path initramfs, Path log) throws IOException, InterruptedException {
        Path script = root.resolve("guest-images/fuzz-reference.sh");
        Path err = Files.createTempFile("kpemu-fuzz-qemu", ".err");
        try {
            Process p = new ProcessBuilder(script.toString(), qemuKernel.toString(), arch.linuxName(), initramfs.toString(), log.toString())
                    .redirectError(err.toFile()).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            String command = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            int rc = p.waitFor();
            if (rc != 0) {
                return new FuzzRun(Map.of(), List.of(), command, "fuzz-reference.sh failed (" + rc + "): "
                        + Files.readString(err, StandardCharsets.ISO_8859_1).strip());
            }
            String console = Files.exists(log) ? GuestText.decode(Files.readAllBytes(log)) : "";
            return parseConsole(console, command);
        } finally {
            Files.deleteIfExists(err);
        }
    }

    /** The run a console shows (the corpus guest's lines; carriage returns dropped). */
    static FuzzRun parseConsole(String console, String command) {
        Map<String, String> refused = new LinkedHashMap<>();
        List<String> trace = new ArrayList<>();
        String lastRefused = null;
        boolean inTrace = false, ended = false, complained = false;
        for (String raw : console.split("\n")) {
            String l = raw.replace("\r", "");
            if (l.startsWith(CorpusGuest.REFUSED + " ")) {
                lastRefused = l.substring(CorpusGuest.REFUSED.length() + 1).strip();
                refused.put(lastRefused, "");
                continue;
            }
            if (l.startsWith(CorpusGuest.ERROR_LOG_LINE + " ") && lastRefused != null) {
                String entry = LOG_TIMESTAMP.matcher(l.substring(CorpusGuest.ERROR_LOG_LINE.length() + 1)).replaceFirst("");
                if (refused.get(lastRefused).isEmpty() && entry.contains("error:")) refused.put(lastRefused, entry.strip());
                continue;
            }
            if (l.startsWith(CorpusGuest.TRACE_BEGIN)) { inTrace = true; continue; }
            if (l.startsWith(CorpusGuest.TRACE_END)) { inTrace = false; ended = true; continue; }
            if (l.matches(".*(BUG:|Oops|WARNING:).*") && KERNEL_LINE.matcher(l).matches()) complained = true;
            if (inTrace && !l.startsWith("#") && !KERNEL_LINE.matcher(l).matches() && l.contains(": (")) trace.add(l);
        }
        String failure = !ended ? "the QEMU boot did not reach " + CorpusGuest.TRACE_END
                : complained ? "Linux complained (BUG, Oops or WARNING on its console)" : null;
        return new FuzzRun(refused, trace, command, failure);
    }
}
