package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

/**
 * A kernel's {@code System.map} ({@code ADDRESS TYPE NAME} lines, {@code nm}'s format), given by
 * the user ({@code --system-map FILE}) as the source of data symbols a kernel's kallsyms lacks:
 * Debian's arm64 kallsyms has no {@code jiffies} or {@code total_forks} (CONFIG_KALLSYMS_ALL is
 * off there) and its BTF names per-CPU variables only, so {@code w@jiffies} needs it. Debian ships
 * the real file in the {@code linux-image-RELEASE-dbg} package (the one in
 * {@code linux-image-RELEASE} is a one-line stub). A map is used only when it agrees with the
 * booted kernel's kallsyms on the text symbols both have ({@link #mismatch}); addresses are taken
 * as they are (the guests boot with {@code nokaslr}).
 */
public final class SystemMap {
    private final String source;
    private final Map<String, Long> addresses;
    private final Map<String, Character> types;

    private SystemMap(String source, Map<String, Long> addresses, Map<String, Character> types) {
        this.source = source;
        this.addresses = addresses;
        this.types = types;
    }

    /**
     * Reads {@code file}.
     *
     * @throws IllegalArgumentException when it holds no {@code ADDRESS TYPE NAME} line (one line)
     */
    public static SystemMap read(Path file) throws IOException {
        return parse(file.toString(), Files.readAllLines(file, StandardCharsets.ISO_8859_1));
    }

    /** Parses the lines of a System.map named {@code source}. */
    public static SystemMap parse(String source, List<String> lines) {
        Map<String, Long> addresses = new HashMap<>();
        Map<String, Character> types = new HashMap<>();
        for (String l : lines) {
            String[] f = l.strip().split("\\s+");
            if (f.length < 3 || f[1].length() != 1) continue;
            long a;
            try {
                a = Long.parseUnsignedLong(f[0], 16);
            } catch (NumberFormatException e) {
                continue;
            }
            if (a == -1L) continue;                        // Debian's stub line
            addresses.putIfAbsent(f[2], a);
            types.putIfAbsent(f[2], f[1].charAt(0));
        }
        if (addresses.isEmpty())
            throw new IllegalArgumentException(source + " is not a System.map (no ADDRESS TYPE NAME line; Debian's real one is in the linux-image-RELEASE-dbg package)");
        return new SystemMap(source, addresses, types);
    }

    public String source() { return source; }

    /** The address of {@code name}, if the map has it. */
    public OptionalLong address(String name) {
        Long a = addresses.get(name);
        return a == null ? OptionalLong.empty() : OptionalLong.of(a);
    }

    /**
     * Null when the map agrees with the booted kernel's {@code kallsyms} on every text symbol
     * ({@code T}/{@code t}) both have (and they share one), else the one-line reason it does not.
     */
    public String mismatch(KernelSymbols kallsyms) {
        int shared = 0;
        for (var e : addresses.entrySet()) {
            char t = types.get(e.getKey());
            if (t != 'T' && t != 't') continue;
            OptionalLong k = kallsyms.lookupName(e.getKey());
            if (k.isEmpty() || kallsyms.countSymbols(e.getKey()) != 1) continue;
            if (k.getAsLong() != e.getValue())
                return String.format("%s is not the booted kernel's: %s at 0x%x there, 0x%x in the kernel's kallsyms", source, e.getKey(),
                        e.getValue(), k.getAsLong());
            shared++;
        }
        return shared == 0 ? source + " shares no text symbol with the booted kernel's kallsyms" : null;
    }
}
