package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.function.LongFunction;

/**
 * Decodes the kernel's own kallsyms tables from a kernel image (Debian's images are stripped and
 * ship no System.map). The tables are found by their structure, not by symbol names:
 *
 * <ol>
 * <li>{@code kallsyms_token_index}: 256 u16 starting at 0 and strictly increasing, each the offset
 *     of a NUL-terminated printable token in {@code kallsyms_token_table}, which ends just before
 *     the index (alignment padding only);</li>
 * <li>{@code kallsyms_markers}: searching back from the token table, a u32 array starting with 0
 *     whose entries grow by one name-block each (the offset of every 256th name);
 *     6.2+-style kernels (and Debian's 6.1.1xx) put {@code kallsyms_seqs_of_names} in between;</li>
 * <li>{@code kallsyms_num_syms}: a u32 N with ceil(N/256) = marker count, followed (aligned) by
 *     {@code kallsyms_names}; accepted only if decoding N names lands exactly on every marker and
 *     ends at the markers;</li>
 * <li>{@code kallsyms_relative_base} (u64) just before num_syms and {@code kallsyms_offsets}
 *     (N s32, 8-aligned) before it (CONFIG_KALLSYMS_BASE_RELATIVE). With
 *     CONFIG_KALLSYMS_ABSOLUTE_PERCPU (x86-64 SMP) non-negative offsets are absolute (per-CPU)
 *     and negative ones are {@code relative_base - 1 - offset}; otherwise an address is
 *     {@code relative_base + (u32) offset}.</li>
 * </ol>
 *
 * <p>In a relocatable arm64 Image the relative_base slot holds 0 (RELA relocation with the value
 * in the addend): the R_AARCH64_RELATIVE entry whose target is that slot supplies both the value
 * and the Image's link address (r_offset minus the slot's file offset).
 *
 * <p>Name lengths use the 6.1+ "big symbol" encoding (a length byte with bit 7 set is followed by
 * the high bits). Kernels without KALLSYMS_BASE_RELATIVE (absolute u64 addresses) and kernels
 * whose offsets are {@code _text}-relative with no relative_base are not supported.
 */
public final class Kallsyms {
    private static final int R_AARCH64_RELATIVE = 1027, R_X86_64_RELATIVE = 8;

    /** Where the tables are (file offsets) and how many symbols there are. */
    public record Layout(int tokenTable, int tokenIndex, int markers, int numMarkers, int numSymsAt, int numSyms,
                         int names, int offsets, int relativeBaseAt) {}

    private Kallsyms() {}

    /**
     * Reads a kernel file of any supported kind: arm64 Image (also Image.gz or EFI zboot,
     * decompressed), x86 bzImage (decompressed) or ELF vmlinux.
     */
    public static SymbolTable read(Path kernel) throws KernelImageException {
        return load(kernel).symbols();
    }

    /**
     * A kernel's symbols with the bytes they index: the raw arm64 Image (decompressed if need be)
     * or the ELF vmlinux (a bzImage's payload, decompressed); {@link SymbolTable#fileOffset} gives
     * offsets into them.
     */
    public record KernelText(SymbolTable symbols, byte[] bytes) {}

    /** Like {@link #read}, keeping the kernel's bytes (to read its text before boot). */
    public static KernelText load(Path kernel) throws KernelImageException {
        byte[] d = ImageFiles.read(kernel);
        if (KernelFiles.isArm64Kernel(d)) {
            byte[] image = KernelFiles.arm64Image(d, kernel.toString());
            return new KernelText(fromArm64Image(image, kernel.toString()), image);
        }
        ElfImage elf;
        if (ImageFiles.isBzImage(d)) elf = BzImage.parse(d, kernel.toString()).vmlinux();
        else if (ImageFiles.isElf(d)) elf = ElfImage.parse(d, kernel.toString());
        else throw new KernelImageException(kernel + ": not a kernel image: it is " + ImageFiles.describe(d));
        return new KernelText(fromElf(elf), elf.bytes());
    }

    /** Symbols of a raw arm64 {@code Image}; file offset = address - link base. */
    public static SymbolTable fromArm64Image(byte[] image, String name) throws KernelImageException {
        Arm64Image header = Arm64Image.parse(image, name);
        Layout l = locate(image, name);
        ByteBuffer b = ImageFiles.le(image);
        long relBase = b.getLong(l.relativeBaseAt);
        long base = Long.MIN_VALUE;
        long[] rela = findRelative(image, R_AARCH64_RELATIVE, (off, addend) -> {
            long cand = off - l.relativeBaseAt;          // r_offset - slot = link base (2 MiB aligned)
            return (cand & 0x1fffffL) == 0 && (cand >>> 48) == 0xffffL
                    && Long.compareUnsigned(addend - cand, header.effectiveSize()) < 0;
        });
        if (rela != null) {
            base = rela[0] - l.relativeBaseAt;
            if (relBase == 0) relBase = rela[1];
        }
        if (relBase == 0) throw new KernelImageException(name + ": kallsyms_relative_base is 0 and no relocation supplies it");
        List<Symbol> syms = decode(image, l, relBase, false, name);
        if (base == Long.MIN_VALUE) {
            base = syms.stream().filter(s -> s.name().equals("_text")).mapToLong(Symbol::address).findFirst()
                    .orElse(relBase & ~0x1fffffL);
        }
        final long linkBase = base;
        final long size = image.length;
        LongFunction<OptionalLong> map = a -> {
            long off = a - linkBase;
            return off >= 0 && off < size ? OptionalLong.of(off) : OptionalLong.empty();
        };
        return new SymbolTable(SymbolTable.withSizes(syms), linkBase, map, name);
    }

    /** Symbols of an ELF vmlinux (e.g. the decompressed bzImage payload); offsets via PT_LOAD. */
    public static SymbolTable fromElf(ElfImage elf) throws KernelImageException {
        byte[] d = elf.bytes();
        Layout l = locate(d, elf.name());
        long relBase = ImageFiles.le(d).getLong(l.relativeBaseAt);
        if (relBase == 0) {
            OptionalLong slot = elf.vaddrOfFileOffset(l.relativeBaseAt);
            int type = elf.machine() == ElfImage.EM_AARCH64 ? R_AARCH64_RELATIVE : R_X86_64_RELATIVE;
            long[] r = slot.isPresent() ? findRelative(d, type, (off, addend) -> off == slot.getAsLong()) : null;
            if (r == null) throw new KernelImageException(elf.name() + ": kallsyms_relative_base is 0 and no relocation supplies it");
            relBase = r[1];
        }
        boolean absolutePercpu = elf.machine() == ElfImage.EM_X86_64;
        List<Symbol> syms = decode(d, l, relBase, absolutePercpu, elf.name());
        long base = syms.stream().filter(s -> s.name().equals("_text")).mapToLong(Symbol::address).findFirst()
                .orElse(elf.loadSegments().isEmpty() ? relBase : elf.loadSegments().get(0).vaddr());
        return new SymbolTable(SymbolTable.withSizes(syms), base, elf::fileOffsetOf, elf.name());
    }

    /** Finds the tables. */
    public static Layout locate(byte[] d, String name) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(d);
        int[] tok = findTokenTable(d, b);
        if (tok == null) throw new KernelImageException(name + ": no kallsyms token table found (kernel without CONFIG_KALLSYMS, or not a kernel)");
        int tokenTable = tok[0], tokenIndex = tok[1];

        // kallsyms_markers: search back from the token table.
        int markers = -1, numMarkers = 0;
        int limit = Math.max(0, tokenTable - (32 << 20));
        for (int p = (tokenTable & ~3) - 4; p >= limit; p -= 4) {
            if (b.getInt(p) != 0) continue;
            int n = markerRun(b, p, tokenTable);
            if (n >= 17) { markers = p; numMarkers = n; break; }
        }
        if (markers < 0) throw new KernelImageException(name + ": corrupt kallsyms: no kallsyms_markers before the token table at 0x" + Integer.toHexString(tokenTable));
        long lastMarker = b.getInt(markers + 4 * (numMarkers - 1)) & 0xffffffffL;

        // kallsyms_num_syms + kallsyms_names: verify by decoding every name length.
        long lo = 256L * (numMarkers - 1) + 1, hi = 256L * numMarkers;
        int numSymsAt = -1, names = -1, numSyms = 0;
        int from = (int) ((markers - lastMarker) & ~3L);
        for (int p = from; p >= Math.max(0, from - (1 << 20)) && numSymsAt < 0; p -= 4) {
            long v = b.getInt(p) & 0xffffffffL;
            if (v < lo || v > hi) continue;
            for (int start : new int[]{p + 4, (p + 4 + 7) & ~7}) {
                if (namesMatch(d, b, start, (int) v, markers, numMarkers)) { numSymsAt = p; names = start; numSyms = (int) v; break; }
            }
        }
        if (numSymsAt < 0) throw new KernelImageException(name + ": corrupt kallsyms: no kallsyms_num_syms/kallsyms_names matching the " + numMarkers + " markers");

        // kallsyms_relative_base + kallsyms_offsets, just before num_syms (8-aligned).
        int rb = (numSymsAt & ~7) - 8;
        int offsets = rb - 4 * numSyms;
        if ((offsets & 7) != 0) offsets -= 4;
        if (offsets < 0) throw new KernelImageException(name + ": corrupt kallsyms: kallsyms_offsets would start before the file");
        return new Layout(tokenTable, tokenIndex, markers, numMarkers, numSymsAt, numSyms, names, offsets, rb);
    }

    /** [tableStart, indexStart] or null. */
    private static int[] findTokenTable(byte[] d, ByteBuffer b) {
        for (int p = 0; p + 512 <= d.length; p += 2) {
            if (d[p] != 0 || d[p + 1] != 0) continue;
            int prev = 0, i = 1;
            for (; i < 256; i++) {
                int v = b.getShort(p + 2 * i) & 0xffff;
                if (v - prev < 2 || v - prev > 256) break;
                prev = v;
            }
            if (i < 256) continue;
            int last = prev;
            // The table ends (after its last token's NUL) at most 7 padding bytes before the index.
            for (int s = p - last - 2; s >= Math.max(0, p - last - 300); s--) {
                int e = s + last;
                while (e < p && d[e] != 0) e++;
                if (e >= p || e == s + last || p - (e + 1) > 7) continue;
                if (tokensValid(d, b, s, p)) return new int[]{s, p};
            }
        }
        return null;
    }

    private static boolean tokensValid(byte[] d, ByteBuffer b, int s, int idx) {
        for (int i = 0; i < 256; i++) {
            int start = s + (b.getShort(idx + 2 * i) & 0xffff);
            int end = i < 255 ? s + (b.getShort(idx + 2 * i + 2) & 0xffff) - 1 : -1;
            if (i > 0 && d[start - 1] != 0) return false;
            int q = start;
            while (q < idx && d[q] != 0) {
                int c = d[q] & 0xff;
                if (c < 0x20 || c > 0x7e) return false;
                q++;
            }
            if (q == start || (end >= 0 && q != end)) return false;
            if (i == 255) for (int z = q; z < idx; z++) if (d[z] != 0) return false;
        }
        return true;
    }

    /** Length of a marker run starting at p (0, then growing by 512..32768 per 256 names). */
    private static int markerRun(ByteBuffer b, int p, int end) {
        long prev = 0;
        int n = 1;
        for (int q = p + 4; q + 4 <= end; q += 4) {
            long v = b.getInt(q) & 0xffffffffL;
            if (v < prev + 256 * 2 || v > prev + 256 * 128) break;
            prev = v;
            n++;
        }
        return n;
    }

    private static boolean namesMatch(byte[] d, ByteBuffer b, int start, int n, int markers, int numMarkers) {
        int q = start;
        for (int i = 0; i < n; i++) {
            if ((i & 255) == 0 && q - start != b.getInt(markers + 4 * (i >> 8))) return false;
            if (q >= markers) return false;
            int len = d[q++] & 0xff;
            if ((len & 0x80) != 0) len = (len & 0x7f) | (d[q++] & 0xff) << 7;
            if (len == 0) return false;
            q += len;
        }
        return q <= markers && markers - q < 8;
    }

    private static List<Symbol> decode(byte[] d, Layout l, long relBase, boolean absolutePercpu, String name) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(d);
        String[] tokens = new String[256];
        for (int i = 0; i < 256; i++) {
            int s = l.tokenTable + (b.getShort(l.tokenIndex + 2 * i) & 0xffff), e = s;
            while (d[e] != 0) e++;
            tokens[i] = new String(d, s, e - s, StandardCharsets.ISO_8859_1);
        }
        if (absolutePercpu) {   // a kernel without SMP has no absolute per-CPU entries: all offsets >= 0
            boolean anyNegative = false;
            for (int i = 0; i < l.numSyms && !anyNegative; i++) anyNegative = b.getInt(l.offsets + 4 * i) < 0;
            absolutePercpu = anyNegative;
        }
        List<Symbol> out = new ArrayList<>(l.numSyms);
        StringBuilder sb = new StringBuilder(64);
        int q = l.names;
        long prev = 0;
        for (int i = 0; i < l.numSyms; i++) {
            int len = d[q++] & 0xff;
            if ((len & 0x80) != 0) len = (len & 0x7f) | (d[q++] & 0xff) << 7;
            sb.setLength(0);
            for (int k = 0; k < len; k++) sb.append(tokens[d[q + k] & 0xff]);
            q += len;
            int off = b.getInt(l.offsets + 4 * i);
            long addr;
            if (absolutePercpu) addr = off >= 0 ? off : relBase - 1 - off;
            else addr = relBase + (off & 0xffffffffL);
            if (i > 0 && Long.compareUnsigned(addr, prev) < 0) {
                throw new KernelImageException(name + ": corrupt kallsyms: symbol " + i + " (" + sb.substring(1)
                        + ") at 0x" + Long.toHexString(addr) + " is below its predecessor; kallsyms_offsets not where expected");
            }
            prev = addr;
            if (sb.length() < 2) throw new KernelImageException(name + ": corrupt kallsyms: empty name for symbol " + i);
            out.add(new Symbol(sb.substring(1), addr, sb.charAt(0), 0));
        }
        return out;
    }

    /**
     * Scans for an 8-aligned Elf64_Rela {r_offset, r_info = type, r_addend} whose r_offset the
     * predicate accepts; returns {r_offset, r_addend} of the only such entry, or null.
     */
    private interface RelaFilter { boolean test(long rOffset, long rAddend); }

    private static long[] findRelative(byte[] d, int type, RelaFilter accept) {
        ByteBuffer b = ImageFiles.le(d);
        long[] found = null;
        for (int p = 8; p + 16 <= d.length; p += 8) {
            if (b.getLong(p) != type) continue;
            long off = b.getLong(p - 8);
            long addend = b.getLong(p + 8);
            if (!accept.test(off, addend)) continue;
            long[] r = {off, addend};
            if (found != null && (found[0] != r[0] || found[1] != r[1])) return null;   // ambiguous
            found = r;
        }
        return found;
    }
}
