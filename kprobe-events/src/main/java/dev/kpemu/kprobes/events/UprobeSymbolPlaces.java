package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

import dev.kpemu.image.ElfImage;
import dev.kpemu.image.KernelImageException;

/**
 * kpemu's extension of Linux's uprobe places (like its globs for kprobes): {@code PATH:SYMBOL[+OFFS]}
 * resolved from the file's ELF symbol tables ({@code .symtab}, then {@code .dynsym}), as
 * {@code perf probe -x} does, to the {@code PATH:0xOFFSET} Linux's {@code uprobe_events} takes
 * (OFFSET the file offset of the symbol's address through the PT_LOAD segment holding it, plus
 * OFFS). Only places Linux refuses are taken: a place whose text after the last {@code :} starts
 * with a digit is Linux's and left alone (Linux refuses every other one with a silent EINVAL), so
 * nothing Linux accepts changes meaning. A {@code %return} suffix stays. What cannot be resolved
 * (not an ELF file, a stripped file, an unknown symbol, a symbol with no file bytes) is a
 * {@link Unresolved} with a one-line message.
 */
public final class UprobeSymbolPlaces {
    private UprobeSymbolPlaces() {}

    /** A symbol place that cannot be resolved; the message is one line. */
    public static final class Unresolved extends RuntimeException {
        Unresolved(String message) { super(message); }
    }

    /** A probe-able function of a program: its name and file offset. */
    public record Function(String name, long fileOffset, long size) {}

    /** Whether the place (the definition's second word) is kpemu's {@code PATH:SYMBOL[+OFFS]} form. */
    public static boolean isSymbolPlace(String place) {
        int colon = place.lastIndexOf(':');
        if (place.indexOf('/') < 0 || colon < 0 || colon + 1 >= place.length()) return false;
        char c = place.charAt(colon + 1);
        return !(c >= '0' && c <= '9');
    }

    /**
     * The definition line with a {@code PATH:SYMBOL[+OFFS][%return]} place replaced by
     * {@code PATH:0xOFFSET[%return]}; any other line unchanged.
     */
    public static String resolve(String line, GuestFiles files) {
        String stripped = line.strip();
        String[] words = stripped.split("\\s+", 3);
        if (words.length < 2 || !isSymbolPlace(words[1])) return line;
        String place = words[1];
        int colon = place.lastIndexOf(':');
        String path = place.substring(0, colon);
        String spec = place.substring(colon + 1);
        String suffix = "";
        if (spec.endsWith("%return")) {
            suffix = "%return";
            spec = spec.substring(0, spec.length() - suffix.length());
        }
        long offs = 0;
        int plus = spec.indexOf('+');
        String symbol = plus < 0 ? spec : spec.substring(0, plus);
        if (plus >= 0) {
            try {
                offs = Long.decode(spec.substring(plus + 1));
            } catch (NumberFormatException e) {
                throw new Unresolved("kpemu: " + place + ": '" + spec.substring(plus + 1) + "' is not an offset (SYMBOL+OFFS takes a decimal or 0x number)");
            }
        }
        long at = offsetOf(path, symbol, files) + offs;
        String resolved = path + ":0x" + Long.toHexString(at) + suffix;
        return words[0] + " " + resolved + (words.length > 2 ? " " + words[2] : "");
    }

    /** The file offset of {@code symbol} in the guest file {@code path}. */
    public static long offsetOf(String path, String symbol, GuestFiles files) {
        for (Function f : functions(path, files, true)) if (f.name().equals(symbol)) return f.fileOffset();
        throw new Unresolved("kpemu: " + path + ": no symbol '" + symbol + "' in its .symtab or .dynsym");
    }

    /** The functions (STT_FUNC symbols with file bytes) of the guest file {@code path}, in the order of its symbol tables. */
    public static List<Function> functions(String path, GuestFiles files) {
        return functions(path, files, false);
    }

    private static List<Function> functions(String path, GuestFiles files, boolean anyKind) {
        GuestFiles.Lookup l = files.lookup(path);
        if (!l.found()) throw new Unresolved("kpemu: " + path + ": no such file in the guest's initramfs (" + l.errno() + ")");
        if (!l.regular()) throw new Unresolved("kpemu: " + path + ": not a regular file");
        byte[] bytes = files.contents(l.canonicalPath());
        if (bytes == null) throw new Unresolved("kpemu: " + path + ": its contents are not known to kpemu");
        return functions(path, bytes, anyKind);
    }

    /** The functions of an ELF file's bytes ({@code name} for messages). */
    public static List<Function> functions(String name, byte[] bytes) {
        return functions(name, bytes, false);
    }

    private static List<Function> functions(String name, byte[] bytes, boolean anyKind) {
        ElfImage elf;
        List<ElfImage.ElfSymbol> syms = new ArrayList<>();
        try {
            elf = ElfImage.parse(bytes, name);
            syms.addAll(elf.symbols());
            syms.addAll(elf.dynamicSymbols());
        } catch (KernelImageException e) {
            throw new Unresolved("kpemu: " + name + ": not an ELF file kpemu can read (" + e.getMessage() + ")");
        }
        if (syms.isEmpty()) throw new Unresolved("kpemu: " + name + ": stripped (no .symtab or .dynsym): give the place as PATH:OFFSET");
        List<Function> out = new ArrayList<>();
        java.util.Set<String> seen = new java.util.HashSet<>();
        for (ElfImage.ElfSymbol s : syms) {
            boolean function = s.kind() == ElfImage.STT_FUNC;
            if (s.name().isEmpty() || s.section() == ElfImage.SHN_UNDEF || s.section() >= ElfImage.SHN_ABS) continue;
            if (!function && !(anyKind && s.kind() != ElfImage.STT_SECTION && s.kind() != ElfImage.STT_FILE)) continue;
            OptionalLong off = elf.fileOffsetOf(s.value());
            if (off.isEmpty() || !seen.add(s.name())) continue;
            out.add(new Function(s.name(), off.getAsLong(), s.size()));
        }
        return out;
    }
}
