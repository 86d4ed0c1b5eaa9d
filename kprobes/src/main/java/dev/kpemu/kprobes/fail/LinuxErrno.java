package dev.kpemu.kprobes.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/** Linux's errno names and numbers (the resource linux-errno.tsv, from include/uapi/asm-generic). */
public final class LinuxErrno {
    private static final Map<String, Integer> NUMBERS = load();

    private LinuxErrno() {}

    /** The positive number of {@code name} (e.g. ENOMEM: 12). */
    public static Optional<Integer> number(String name) { return Optional.ofNullable(NUMBERS.get(name)); }

    public static Map<String, Integer> all() { return NUMBERS; }

    private static Map<String, Integer> load() {
        var in = LinuxErrno.class.getResourceAsStream("linux-errno.tsv");
        if (in == null) throw new IllegalStateException("linux-errno.tsv missing from the kprobes jar");
        Map<String, Integer> m = new LinkedHashMap<>();
        try (var r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (line.isBlank() || line.startsWith("#")) continue;
                String[] f = line.split("\t");
                m.put(f[0], Integer.parseInt(f[1]));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return Collections.unmodifiableMap(m);
    }
}
