package dev.kpemu.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import dev.kpemu.kprobes.events.FunctionVariables;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.events.ProbeableFunctions;
import dev.kpemu.machine.Arch;

/**
 * What {@code kpemu funcs} and {@code kpemu vars} derive from a kernel file, kept in the project
 * cache ({@code .cache/discovery}) so that asking again reads a small text file instead of
 * decoding kallsyms, the kernel's tables and BTF (seconds): one index per kernel file (its path,
 * size and modification time) and arch, built on first use.
 */
final class DiscoveryIndex {
    private static final String VERSION = "1";
    private final Path dir;
    private final String key;

    DiscoveryIndex(Path cacheRoot, Path kernelFile, Arch arch) {
        this.dir = cacheRoot.resolve("discovery");
        try {
            String id = String.join("\n", VERSION, kernelFile.toAbsolutePath().toString(), Long.toString(Files.size(kernelFile)),
                    Files.getLastModifiedTime(kernelFile).toString(), arch.name());
            this.key = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(id.getBytes(StandardCharsets.UTF_8))).substring(0, 32);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Every probe-able or refused function (built by {@code all} on first use), the ones {@code glob} matches. */
    List<ProbeableFunctions.Function> functions(String glob, Supplier<List<ProbeableFunctions.Function>> all) throws IOException {
        Path f = dir.resolve("funcs-" + key + ".tsv");
        if (!Files.isRegularFile(f)) {
            StringBuilder sb = new StringBuilder();
            for (ProbeableFunctions.Function fn : all.get()) sb.append(fn.name()).append('\t').append(fn.refusal() == null ? "" : fn.refusal()).append('\n');
            write(f, sb.toString());
        }
        Pattern p = ProbeGlob.pattern(glob);
        List<ProbeableFunctions.Function> out = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
            for (String l; (l = r.readLine()) != null; ) {
                int tab = l.indexOf('\t');
                if (tab < 0 || !p.matcher(l.substring(0, tab)).matches()) continue;
                String why = l.substring(tab + 1);
                out.add(new ProbeableFunctions.Function(l.substring(0, tab), why.isEmpty() ? null : why));
            }
        }
        return out;
    }

    /** The variables of {@code function} from an index of every BTF function (built by {@code all} on first use). */
    Optional<FunctionVariables.Signature> variables(String function, Supplier<List<FunctionVariables.Signature>> all) throws IOException {
        Path f = dir.resolve("vars-" + key + ".tsv");
        if (!Files.isRegularFile(f)) {
            StringBuilder sb = new StringBuilder();
            for (FunctionVariables.Signature s : all.get()) {
                sb.append('>').append(s.function()).append('\t').append(s.prototype()).append('\n');
                for (FunctionVariables.Variable v : s.variables()) {
                    sb.append(String.join("\t", v.name(), v.cType(), v.fetchType() == null ? "-" : v.fetchType(),
                            v.argument() == null ? "-" : v.argument(), v.register(), v.also())).append('\n');
                }
            }
            write(f, sb.toString());
        }
        String head = ">" + function + "\t";
        try (BufferedReader r = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
            for (String l; (l = r.readLine()) != null; ) {
                if (!l.startsWith(head)) continue;
                String prototype = l.substring(head.length());
                List<FunctionVariables.Variable> vars = new ArrayList<>();
                while ((l = r.readLine()) != null && !l.startsWith(">")) {
                    String[] c = l.split("\t", -1);
                    vars.add(new FunctionVariables.Variable(c[0], c[1], c[2].equals("-") ? null : c[2], c[3].equals("-") ? null : c[3], c[4], c[5]));
                }
                return Optional.of(new FunctionVariables.Signature(function, prototype, vars));
            }
        }
        return Optional.empty();
    }

    private static void write(Path f, String text) throws IOException {
        Files.createDirectories(f.getParent());
        Path tmp = Files.createTempFile(f.getParent(), f.getFileName().toString(), ".tmp");
        Files.writeString(tmp, text, StandardCharsets.UTF_8);
        Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
}
