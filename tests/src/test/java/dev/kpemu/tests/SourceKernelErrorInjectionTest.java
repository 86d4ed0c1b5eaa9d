package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.ElfImage;
import dev.kpemu.machine.Arch;

/**
 * The method of {@code guest-images/record-error-injection.sh} (the error-injection lists of
 * Debian's kernels, which are built without one) checked against a list Linux compiled: the
 * source-built kernel ({@link SourceKernelTest#built}, with {@code CONFIG_FUNCTION_ERROR_INJECTION})
 * carries its own {@code _error_injection_whitelist} between {@code __start_error_injection_whitelist}
 * and {@code __stop_error_injection_whitelist}, entries {@code {unsigned long addr; int etype;}}
 * (include/asm-generic/error-injection.h). The script's {@code --tree} mode derives the list from the
 * same source tree, kept to the vmlinux's (non-weak) functions; both must be the same set of
 * (function, type).
 */
@Tag("source-kernel")
class SourceKernelErrorInjectionTest {
    /** An ELF64 RELA entry's size, and arm64's R_AARCH64_RELATIVE. */
    private static final int RELA_SIZE = 24, R_AARCH64_RELATIVE = 1027;

    @ParameterizedTest(name = "{0}")
    @EnumSource(Arch.class)
    void compiledErrorInjectionListIsTheSourceRule(Arch arch) throws Exception {
        SourceKernelTest.Built k = SourceKernelTest.built(arch);
        Path tree = sourceTree(k);
        ElfImage elf = ElfImage.read(k.vmlinux());
        Map<Long, List<String>> names = new HashMap<>();
        Set<String> functions = new TreeSet<>();
        long start = 0, stop = 0;
        for (ElfImage.ElfSymbol s : elf.symbols()) {
            if (s.name().equals("__start_error_injection_whitelist")) start = s.value();
            if (s.name().equals("__stop_error_injection_whitelist")) stop = s.value();
            if (s.kind() == ElfImage.STT_FUNC && s.bind() != ElfImage.STB_WEAK && s.section() != ElfImage.SHN_UNDEF) {
                names.computeIfAbsent(s.value(), a -> new ArrayList<>()).add(s.name());
                functions.add(s.name());
            }
        }
        assertTrue(start != 0 && stop > start, "the kernel carries an _error_injection_whitelist (CONFIG_FUNCTION_ERROR_INJECTION)");
        List<String> etypes = etypes(tree);

        // Linux's compiled list: (address, type) per entry
        Set<String> compiled = new TreeSet<>();
        List<String> unnamed = new ArrayList<>();
        long[] addrs = entryAddresses(elf, k.vmlinux(), start, stop);
        int[] types = entryTypes(elf, k.vmlinux(), start, stop);
        for (int i = 0; i < addrs.length; i++) {
            List<String> at = names.get(addrs[i]);
            if (at == null) { unnamed.add(Long.toHexString(addrs[i])); continue; }
            compiled.add(String.join("|", new TreeSet<>(at)) + " " + etypes.get(types[i]));
        }
        assertTrue(unnamed.isEmpty(), "every entry is a function's address: " + unnamed);

        // the script's list from the same tree, kept to the vmlinux's functions
        Path work = SourceKernelTest.WORK;
        Files.createDirectories(work);
        Path symbols = work.resolve("functions-" + arch.linuxName() + ".txt");
        Files.write(symbols, functions);
        Path list = work.resolve("error-injection-" + arch.linuxName() + ".list");
        Files.deleteIfExists(list);
        Path log = work.resolve("record-error-injection-" + arch.linuxName() + ".log");
        SourceKernelTest.Run r = SourceKernelTest.run(List.of("bash",
                SourceKernelTest.ROOT.resolve("guest-images/record-error-injection.sh").toString(),
                "--tree", tree.toString(), "--symbols", symbols.toString(), "--out", list.toString(), arch.linuxName()),
                log, Map.of(), 600);
        assertEquals(0, r.exit(), () -> "record-error-injection.sh --tree failed:\n" + SourceKernelTest.tail(log));
        Map<String, String> derived = new HashMap<>();
        for (String l : Files.readAllLines(list)) {
            if (l.startsWith("#") || l.isBlank()) continue;
            String[] f = l.split(" ");
            derived.put(f[0], f[1]);
        }
        // an entry's names (aliases at one address: SYSCALL_DEFINE0's __x64_sys_X = __do_sys_X) meet
        // the derived list in exactly one name
        Set<String> derivedAsCompiled = new TreeSet<>();
        Set<String> missing = new TreeSet<>();
        Set<String> covered = new TreeSet<>();
        for (String e : compiled) {
            String[] f = e.split(" ");
            String hit = null;
            for (String n : f[0].split("\\|")) if (derived.containsKey(n)) hit = n;
            if (hit == null || !derived.get(hit).equals(f[1])) { missing.add(e); continue; }
            covered.add(hit);
            derivedAsCompiled.add(e);
        }
        Set<String> extra = new TreeSet<>(derived.keySet());
        extra.removeAll(covered);
        System.out.println(arch.linuxName() + ": compiled _error_injection_whitelist " + addrs.length + " entries, derived list "
                + derived.size() + " functions, equal " + derivedAsCompiled.size());
        assertTrue(missing.isEmpty(), arch + ": compiled entries the source rule misses (or types differently): " + missing);
        assertTrue(extra.isEmpty(), arch + ": derived functions Linux did not compile into its list: " + extra);
        assertTrue(addrs.length > 100, "a list of some size: " + addrs.length);
    }

    /** The unpacked source build-kernel.sh built from (its build-info's tree=). */
    static Path sourceTree(SourceKernelTest.Built k) throws IOException {
        for (String l : Files.readAllLines(k.image().getParent().resolve("build-info"))) {
            if (l.startsWith("tree=")) return Path.of(l.substring(5));
        }
        throw new AssertionError("build-info of " + k.image() + " names no source tree; rebuild with guest-images/build-kernel.sh");
    }

    /** EI_ETYPE_* names in the enum's order, from the tree's include/asm-generic/error-injection.h. */
    static List<String> etypes(Path tree) throws IOException {
        String h = Files.readString(tree.resolve("include/asm-generic/error-injection.h"));
        Matcher enumBody = Pattern.compile("enum \\{([^}]*)\\}").matcher(h);
        assertTrue(enumBody.find(), "error-injection.h has the EI_ETYPE enum");
        List<String> out = new ArrayList<>();
        Matcher m = Pattern.compile("EI_ETYPE_([A-Z_]+)").matcher(enumBody.group(1));
        while (m.find()) out.add(m.group(1));
        assertTrue(enumBody.group(1).indexOf('=') < 0, "the enum counts from 0 without explicit values");
        return out;
    }

    /** The entries' addr fields: as the file holds them, or (arm64 links --no-apply-dynamic-relocs) the RELATIVE relocations' addends. */
    private static long[] entryAddresses(ElfImage elf, Path file, long start, long stop) throws Exception {
        int n = (int) ((stop - start) / 16);
        assertEquals(0, (stop - start) % 16, "entries of 16 bytes");
        ByteBuffer b = read(elf, file, start, stop - start);
        long[] out = new long[n];
        for (int i = 0; i < n; i++) out[i] = b.getLong(i * 16);
        boolean anyZero = false;
        for (long a : out) anyZero |= a == 0;
        if (!anyZero) return out;
        ElfImage.Section rela = elf.section(".rela.dyn").orElseThrow(() -> new AssertionError("entries hold 0 and there is no .rela.dyn"));
        ByteBuffer r = readAt(file, rela.offset(), rela.size());
        for (long o = 0; o + RELA_SIZE <= rela.size(); o += RELA_SIZE) {
            long off = r.getLong((int) o), info = r.getLong((int) o + 8), addend = r.getLong((int) o + 16);
            if ((int) info != R_AARCH64_RELATIVE || off < start || off >= stop || (off - start) % 16 != 0) continue;
            out[(int) ((off - start) / 16)] = addend;
        }
        return out;
    }

    private static int[] entryTypes(ElfImage elf, Path file, long start, long stop) throws Exception {
        ByteBuffer b = read(elf, file, start, stop - start);
        int[] out = new int[(int) ((stop - start) / 16)];
        for (int i = 0; i < out.length; i++) out[i] = b.getInt(i * 16 + 8);
        return out;
    }

    /** {@code len} bytes at virtual address {@code va}, from the section that holds them. */
    private static ByteBuffer read(ElfImage elf, Path file, long va, long len) throws IOException {
        for (ElfImage.Section s : elf.sections()) {
            if (s.type() == ElfImage.SHT_NOBITS || !s.alloc() || s.addr() == 0) continue;
            if (Long.compareUnsigned(va - s.addr(), s.size()) < 0) return readAt(file, s.offset() + (va - s.addr()), len);
        }
        throw new AssertionError("no section holds " + Long.toHexString(va));
    }

    private static ByteBuffer readAt(Path file, long offset, long len) throws IOException {
        byte[] d = new byte[Math.toIntExact(len)];
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "r")) {
            f.seek(offset);
            f.readFully(d);
        }
        return ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN);
    }
}
