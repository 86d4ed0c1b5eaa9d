package dev.kpemu.kprobes.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A kernel's error-injectable functions and their types, Linux's {@code _error_injection_whitelist}
 * (include/asm-generic/error-injection.h): the recorded lists
 * {@code guest-images/reference/error-injection/ARCH/SERIES.list}, one {@code FUNCTION ETYPE}
 * a line, {@code #} comments.
 */
public final class ErrorInjectionList {
    /** Linux's {@code EI_ETYPE_*} without the prefix. */
    public enum EType { NULL, ERRNO, ERRNO_NULL, TRUE, FALSE }

    private final Map<String, EType> types;

    private ErrorInjectionList(Map<String, EType> types) { this.types = Collections.unmodifiableMap(types); }

    public static ErrorInjectionList of(Map<String, EType> types) { return new ErrorInjectionList(new TreeMap<>(types)); }

    /** Parses a list; IllegalArgumentException naming the line for a malformed one. */
    public static ErrorInjectionList parse(Reader in, String source) throws IOException {
        Map<String, EType> m = new TreeMap<>();
        BufferedReader r = new BufferedReader(in);
        int n = 0;
        for (String line; (line = r.readLine()) != null; ) {
            n++;
            String t = line.strip();
            if (t.isEmpty() || t.startsWith("#")) continue;
            String[] f = t.split("\\s+");
            if (f.length != 2) throw new IllegalArgumentException(source + ":" + n + ": expected 'FUNCTION ETYPE'");
            try {
                m.put(f[0], EType.valueOf(f[1]));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(source + ":" + n + ": unknown type '" + f[1] + "' (ERRNO, ERRNO_NULL, NULL, TRUE, FALSE)");
            }
        }
        return new ErrorInjectionList(m);
    }

    /** The recorded list of {@code arch} ({@code x86_64}, {@code arm64}) and {@code series} ({@code 6.1}, …) under {@code referenceDir}, if recorded. */
    public static Optional<ErrorInjectionList> recorded(Path referenceDir, String arch, String series) throws IOException {
        Path file = referenceDir.resolve("error-injection").resolve(arch).resolve(series + ".list");
        if (!Files.isRegularFile(file)) return Optional.empty();
        try (Reader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            return Optional.of(parse(in, file.toString()));
        }
    }

    public Optional<EType> type(String function) { return Optional.ofNullable(types.get(function)); }

    public boolean allows(String function) { return types.containsKey(function); }

    /** Every function and its type, sorted by name. */
    public Map<String, EType> all() { return types; }
}
