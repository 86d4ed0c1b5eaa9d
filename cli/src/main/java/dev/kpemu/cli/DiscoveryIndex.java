package dev.kpemu.cli;

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
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import dev.kpemu.kprobes.events.FunctionVariables;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.events.ProbeableFunctions;
import dev.kpemu.machine.Arch;

/**
 * What {@code kpemu funcs} and {@code kpemu vars} derive from a kernel file, kept in the project
 * cache ({@code .cache/discovery}) so that asking again reads a small text file instead of
 * decoding kallsyms, the kernel's tables and BTF (seconds): one index per kernel file (its real
 * path, size and modification time) and arch, built on first use.
 *
 * <p>Each index is a directory of small text files, so that an answer reads only the part it
 * needs: {@code funcs-KEY/all.tsv} (every function in the kernel's order, for a glob that starts
 * with a wildcard) and one file per first character ({@code funcs-KEY/NN.tsv}, NN its code in hex,
 * for a glob that starts with a literal: {@code tcp_*} reads the {@code t} file); {@code vars-KEY/NN.tsv}
 * holds the functions whose name hashes to NN ({@link #VARS_SHARDS} files).
 */
final class DiscoveryIndex {
    private static final String VERSION = "2";
    static final int VARS_SHARDS = 256;
    /** How many indexes this JVM built from a kernel file (the slow path); an answer from the cache adds none. */
    private static final AtomicInteger BUILDS = new AtomicInteger();
    private final Path dir;
    private final String key;

    DiscoveryIndex(Path cacheRoot, Path kernelFile, Arch arch) {
        this.dir = cacheRoot.resolve("discovery");
        try {
            Path real = kernelFile.toRealPath();
            String id = String.join("\n", VERSION, real.toString(), Long.toString(Files.size(real)),
                    Files.getLastModifiedTime(real).toString(), arch.name());
            this.key = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(id.getBytes(StandardCharsets.UTF_8))).substring(0, 32);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The number of indexes built from a kernel file in this JVM (tests: a cached answer decodes nothing). */
    static int builds() { return BUILDS.get(); }

    /** Every probe-able or refused function (built by {@code all} on first use), the ones {@code glob} matches. */
    List<ProbeableFunctions.Function> functions(String glob, Supplier<List<ProbeableFunctions.Function>> all) throws IOException {
        Path index = dir.resolve("funcs-" + key);
        if (!Files.isDirectory(index)) {
            BUILDS.incrementAndGet();
            StringBuilder every = new StringBuilder();
            TreeMap<String, StringBuilder> shards = new TreeMap<>();
            for (ProbeableFunctions.Function fn : all.get()) {
                String line = fn.name() + '\t' + (fn.refusal() == null ? "" : fn.refusal()) + '\n';
                every.append(line);
                shards.computeIfAbsent(firstShard(fn.name()), k -> new StringBuilder()).append(line);
            }
            TreeMap<String, String> files = new TreeMap<>();
            files.put("all.tsv", every.toString());
            shards.forEach((name, text) -> files.put(name, text.toString()));
            writeDirectory(index, files);
        }
        Pattern p = ProbeGlob.pattern(glob);
        char first = glob.isEmpty() ? '*' : glob.charAt(0);
        boolean literal = first != '*' && first != '?' && first != '[' && first != '\\';
        Path file = index.resolve(literal ? firstShard(glob) : "all.tsv");
        List<ProbeableFunctions.Function> out = new ArrayList<>();
        if (!Files.isRegularFile(file)) return out;   // no function starts with that character
        String text = Files.readString(file, StandardCharsets.UTF_8);
        for (int at = 0, end; at < text.length(); at = end + 1) {
            end = text.indexOf('\n', at);
            if (end < 0) end = text.length();
            int tab = text.indexOf('\t', at);
            if (tab < 0 || tab > end) continue;
            String name = text.substring(at, tab);
            if (!p.matcher(name).matches()) continue;
            out.add(new ProbeableFunctions.Function(name, tab + 1 == end ? null : text.substring(tab + 1, end)));
        }
        return out;
    }

    /** The variables of {@code function} from an index of every BTF function (built by {@code all} on first use). */
    Optional<FunctionVariables.Signature> variables(String function, Supplier<List<FunctionVariables.Signature>> all) throws IOException {
        Path index = dir.resolve("vars-" + key);
        if (!Files.isDirectory(index)) {
            BUILDS.incrementAndGet();
            TreeMap<String, StringBuilder> shards = new TreeMap<>();
            for (FunctionVariables.Signature s : all.get()) {
                StringBuilder sb = shards.computeIfAbsent(varsShard(s.function()), k -> new StringBuilder());
                sb.append('>').append(s.function()).append('\t').append(s.prototype()).append('\n');
                for (FunctionVariables.Variable v : s.variables()) {
                    sb.append(String.join("\t", v.name(), v.cType(), v.fetchType() == null ? "-" : v.fetchType(),
                            v.argument() == null ? "-" : v.argument(), v.register(), v.also())).append('\n');
                }
            }
            TreeMap<String, String> files = new TreeMap<>();
            shards.forEach((name, text) -> files.put(name, text.toString()));
            writeDirectory(index, files);
        }
        Path file = index.resolve(varsShard(function));
        if (!Files.isRegularFile(file)) return Optional.empty();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        String head = ">" + function + "\t";
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).startsWith(head)) continue;
            String prototype = lines.get(i).substring(head.length());
            List<FunctionVariables.Variable> vars = new ArrayList<>();
            for (int j = i + 1; j < lines.size() && !lines.get(j).startsWith(">"); j++) {
                String[] c = lines.get(j).split("\t", -1);
                vars.add(new FunctionVariables.Variable(c[0], c[1], c[2].equals("-") ? null : c[2], c[3].equals("-") ? null : c[3], c[4], c[5]));
            }
            return Optional.of(new FunctionVariables.Signature(function, prototype, vars));
        }
        return Optional.empty();
    }

    /** The funcs file of the names starting with {@code name}'s first character. */
    private static String firstShard(String name) {
        return String.format("%02x.tsv", name.isEmpty() ? 0 : name.charAt(0) & 0xffff);
    }

    /** The vars file of {@code function}: its name's hash, modulo {@link #VARS_SHARDS}. */
    private static String varsShard(String function) {
        return String.format("%02x.tsv", Math.floorMod(function.hashCode(), VARS_SHARDS));
    }

    /** Writes {@code files} (name to text) as the directory {@code target}, whole or not at all. */
    private static void writeDirectory(Path target, TreeMap<String, String> files) throws IOException {
        Files.createDirectories(target.getParent());
        Path tmp = Files.createTempDirectory(target.getParent(), target.getFileName().toString() + ".tmp");
        for (var f : files.entrySet()) Files.writeString(tmp.resolve(f.getKey()), f.getValue(), StandardCharsets.UTF_8);
        try {
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException raced) {
            // another kpemu built the same index meanwhile: keep that one
            if (!Files.isDirectory(target)) throw raced;
            try (var s = Files.list(tmp)) {
                for (Path p : s.toList()) Files.delete(p);
            }
            Files.delete(tmp);
        }
    }
}
