package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.LongFunction;
import java.util.function.LongUnaryOperator;

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
 * <li>{@code kallsyms_offsets} (N x 32 bits), in one of the layouts scripts/kallsyms.c has
 *     written (see {@link #locateOffsets}): up to 6.3, offsets (8-aligned) and the u64
 *     {@code kallsyms_relative_base} just before num_syms; from 6.4, right after the token index
 *     with relative_base after them; in later kernels (Debian's 7.2) right after the token index,
 *     PC-relative (the entry's own address + s32) with no relative_base. Base-relative addresses
 *     are {@code relative_base + (u32) offset}; with CONFIG_KALLSYMS_ABSOLUTE_PERCPU (x86-64 SMP
 *     up to 6.14; recognised by negative entries) non-negative offsets are absolute (per-CPU) and
 *     negative ones are {@code relative_base - 1 - offset}.</li>
 * </ol>
 *
 * <p>In a relocatable arm64 Image the relative_base slot holds 0 (RELA relocation with the value
 * in the addend): the R_AARCH64_RELATIVE entry whose target is that slot supplies both the value
 * and the Image's link address (r_offset minus the slot's file offset; when another entry passes
 * the same test, as in a small built kernel, the one whose link base keeps the most relocation
 * targets inside the Image).
 * PC-relative entries give
 * file offsets only; the link address then comes from the pointers the Image stores (see
 * {@link #arm64LinkBaseFromPointers}).
 *
 * <p>Name lengths use the 6.1+ "big symbol" encoding (a length byte with bit 7 set is followed by
 * the high bits). Kernels without KALLSYMS_BASE_RELATIVE (absolute u64 {@code kallsyms_addresses},
 * removed in 6.11) are not supported.
 *
 * <p>Checked against Linux's own /proc/kallsyms by {@code KallsymsReferenceTest}
 * (recordings by guest-images/record-kallsyms.sh).
 */
public final class Kallsyms {
    private static final int R_AARCH64_RELATIVE = 1027, R_X86_64_RELATIVE = 8;

    /** How an entry of {@code kallsyms_offsets} gives a symbol's address. */
    public enum OffsetsEncoding {
        /** {@code kallsyms_relative_base + (u32) offset}. */
        BASE_RELATIVE,
        /** CONFIG_KALLSYMS_ABSOLUTE_PERCPU: offset {@code >= 0} is absolute, else {@code relative_base - 1 - offset}. */
        ABSOLUTE_PERCPU,
        /** No relative_base: the address of the entry itself plus the (s32) offset. */
        PC_RELATIVE
    }

    /**
     * Where the tables are (file offsets) and how many symbols there are; {@code relativeBaseAt} is
     * -1 for {@link OffsetsEncoding#PC_RELATIVE}.
     */
    public record Layout(int tokenTable, int tokenIndex, int markers, int numMarkers, int numSymsAt, int numSyms,
                         int names, int offsets, int relativeBaseAt, OffsetsEncoding encoding) {}

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
        long linkBase;
        List<Symbol> syms;
        if (l.encoding() == OffsetsEncoding.PC_RELATIVE) {
            linkBase = arm64LinkBaseFromPointers(image, l, header.effectiveSize(), name);
            syms = decode(image, l, 0, off -> linkBase + off, name);
        } else {
            long relBase = ImageFiles.le(image).getLong(l.relativeBaseAt());
            long base = Long.MIN_VALUE;
            List<long[]> candidates = findAllRelative(image, R_AARCH64_RELATIVE, (off, addend) -> {
                long cand = off - l.relativeBaseAt();          // r_offset - slot = link base (2 MiB aligned)
                return (cand & 0x1fffffL) == 0 && (cand >>> 48) == 0xffffL
                        && Long.compareUnsigned(addend - cand, header.effectiveSize()) < 0;
            });
            long[] rela = candidates.size() == 1 ? candidates.get(0) : null;
            if (candidates.size() > 1) rela = coveringMostRelocations(image, candidates, l.relativeBaseAt(), header.effectiveSize());
            if (rela != null) {
                base = rela[0] - l.relativeBaseAt();
                if (relBase == 0) relBase = rela[1];
            }
            if (relBase == 0) throw new KernelImageException(name + ": kallsyms_relative_base is 0 and no relocation supplies it");
            syms = decode(image, l, relBase, null, name);
            if (base == Long.MIN_VALUE) {
                long rb = relBase;
                base = syms.stream().filter(s -> s.name().equals("_text")).mapToLong(Symbol::address).findFirst()
                        .orElse(rb & ~0x1fffffL);
            }
            linkBase = base;
        }
        return new SymbolTable(SymbolTable.withSizes(syms), linkBase, arm64FileOffsets(linkBase, image.length), name);
    }

    /** A raw arm64 Image's file offsets: address - link base, inside the file's {@code size} bytes. */
    public static LongFunction<OptionalLong> arm64FileOffsets(long linkBase, long size) {
        return a -> {
            long off = a - linkBase;
            return off >= 0 && off < size ? OptionalLong.of(off) : OptionalLong.empty();
        };
    }

    /**
     * Symbols of an ELF vmlinux (e.g. the decompressed bzImage payload); offsets via PT_LOAD.
     * An unstripped vmlinux's own {@code .symtab} is preferred ({@link ElfSymbolTable}); a stripped
     * one is read through its kallsyms tables.
     */
    public static SymbolTable fromElf(ElfImage elf) throws KernelImageException {
        Optional<SymbolTable> own = ElfSymbolTable.read(elf);
        return own.isPresent() ? own.get() : fromElfTables(elf);
    }

    /** Symbols of an ELF vmlinux from its kallsyms tables only (ignoring any .symtab). */
    public static SymbolTable fromElfTables(ElfImage elf) throws KernelImageException {
        byte[] d = elf.bytes();
        Layout l = locate(d, elf.name());
        long relBase = 0;
        if (l.encoding() != OffsetsEncoding.PC_RELATIVE) {
            relBase = ImageFiles.le(d).getLong(l.relativeBaseAt());
            if (relBase == 0) {
                OptionalLong slot = elf.vaddrOfFileOffset(l.relativeBaseAt());
                int type = elf.machine() == ElfImage.EM_AARCH64 ? R_AARCH64_RELATIVE : R_X86_64_RELATIVE;
                long[] r = slot.isPresent() ? findRelative(d, type, (off, addend) -> off == slot.getAsLong()) : null;
                if (r == null) throw new KernelImageException(elf.name() + ": kallsyms_relative_base is 0 and no relocation supplies it");
                relBase = r[1];
            }
        } else if (elf.vaddrOfFileOffset(l.offsets()).isEmpty()) {
            throw new KernelImageException(elf.name() + ": kallsyms_offsets at file offset 0x" + Integer.toHexString(l.offsets()) + " is in no PT_LOAD segment");
        }
        long entryBase = l.encoding() == OffsetsEncoding.PC_RELATIVE ? elf.vaddrOfFileOffset(l.offsets()).getAsLong() - l.offsets() : 0;
        List<Symbol> syms = decode(d, l, relBase, off -> entryBase + off, elf.name());
        long fallback = elf.loadSegments().isEmpty() ? relBase : elf.loadSegments().get(0).vaddr();
        long base = syms.stream().filter(s -> s.name().equals("_text")).mapToLong(Symbol::address).findFirst().orElse(fallback);
        return new SymbolTable(SymbolTable.withSizes(syms), base, elf::fileOffsetOf, elf.name());
    }

    private static void voteForBase(long pointer, long effectiveSize, long[] symOffsets, Map<Long, Integer> votes) {
        final long align = 0x200000L;
        if ((pointer >>> 48) != 0xffffL) return;
        for (long base = pointer & -align; Long.compareUnsigned(pointer - base, effectiveSize) < 0; base -= align) {
            if (Arrays.binarySearch(symOffsets, pointer - base) >= 0) votes.merge(base, 1, Integer::sum);
        }
    }

    /**
     * The link address of a relocatable arm64 Image whose kallsyms are PC-relative (they give
     * only file offsets). Pointers stored in the Image are link addresses: in place (RELR-packed
     * relocations, CONFIG_RELR, leave the value in the word) or as the addend of an
     * R_AARCH64_RELATIVE entry. Those that point at symbols (function pointers in tables) vote
     * for the 2 MiB-aligned base that maps them onto a symbol's file offset; the winner must be clear.
     */
    private static long arm64LinkBaseFromPointers(byte[] image, Layout l, long effectiveSize, String name) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(image);
        long[] symOffsets = new long[l.numSyms()];
        for (int i = 0; i < l.numSyms(); i++) symOffsets[i] = l.offsets() + 4L * i + b.getInt(l.offsets() + 4 * i);
        Arrays.sort(symOffsets);
        Map<Long, Integer> votes = new HashMap<>();
        for (int p = 0; p + 8 <= image.length; p += 8) {
            long word = b.getLong(p);
            if (word == R_AARCH64_RELATIVE && p >= 8 && p + 16 <= image.length) {
                voteForBase(b.getLong(p + 8), effectiveSize, symOffsets, votes);   // RELA addend
            } else if ((word >>> 48) == 0xffffL) {
                voteForBase(word, effectiveSize, symOffsets, votes);               // pointer in place
            }
        }
        long best = 0;
        int first = 0, second = 0;
        for (var e : votes.entrySet()) {
            if (e.getValue() > first) { second = first; first = e.getValue(); best = e.getKey(); }
            else if (e.getValue() > second) second = e.getValue();
        }
        if (first < 16 || first < 4 * second) {
            throw new KernelImageException(name + ": cannot tell the Image's link address: its kallsyms are PC-relative and neither"
                    + " stored pointers nor R_AARCH64_RELATIVE relocations agree on a base (best " + first + " votes, next " + second + ")");
        }
        return best;
    }

    /** Finds the tables. */
    public static Layout locate(byte[] d, String name) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(d);
        int[] tok = findTokenTable(d, b);
        if (tok == null) throw new KernelImageException(name + ": no kallsyms tables found (no kallsyms_token_table/kallsyms_token_index):"
                + " kernel built without CONFIG_KALLSYMS, or not a kernel");
        int tokenTable = tok[0], tokenIndex = tok[1];

        // kallsyms_markers: search back from the token table.
        int markers = -1, numMarkers = 0;
        int limit = Math.max(0, tokenTable - (32 << 20));
        for (int p = (tokenTable & ~3) - 4; p >= limit; p -= 4) {
            if (b.getInt(p) != 0) continue;
            int n = markerRun(b, p, tokenTable);
            if (n >= 17) { markers = p; numMarkers = n; break; }
        }
        if (markers < 0) throw new KernelImageException(name + ": kallsyms not understood: a token table at 0x" + Integer.toHexString(tokenTable)
                + " but no kallsyms_markers before it (a kallsyms layout kpemu does not know, or a damaged image)");
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
        if (numSymsAt < 0) throw new KernelImageException(name + ": kallsyms not understood: no kallsyms_num_syms/kallsyms_names agreeing with the "
                + numMarkers + " kallsyms_markers (a kallsyms layout kpemu does not know, or a damaged image)");

        Layout l = locateOffsets(d, b, tokenTable, tokenIndex, markers, numMarkers, numSymsAt, numSyms, names);
        if (l == null) {
            throw new KernelImageException(name + ": unsupported kallsyms layout: " + numSyms + " names decode, but no kallsyms_offsets"
                    + " holding " + numSyms + " ascending addresses lies before kallsyms_num_syms (base-relative, up to 6.3)"
                    + " or after kallsyms_token_index (base-relative or PC-relative, 6.4 and later)");
        }
        return l;
    }

    /**
     * Finds {@code kallsyms_offsets} and its encoding. Up to 6.3 scripts/kallsyms.c emits
     * offsets + relative_base first (before num_syms); from 6.4 they follow the token index,
     * with relative_base after them, and later kernels drop relative_base and emit PC-relative
     * entries. A placement is accepted only if its N entries give ascending addresses (aliases
     * equal) and, for the base-relative kinds, the relative_base slot holds a kernel address or 0
     * (filled in by a RELA relocation). Base-relative is tried first: PC-relative data read as
     * base-relative falls at every alias (equal addresses, entries 4 bytes apart).
     */
    private static Layout locateOffsets(byte[] d, ByteBuffer b, int tokenTable, int tokenIndex, int markers, int numMarkers,
                                        int numSymsAt, int n, int names) {
        int before = (numSymsAt & ~7) - 8;
        int beforeOffsets = before - 4 * n;
        if ((beforeOffsets & 7) != 0) beforeOffsets -= 4;
        int indexEnd = tokenIndex + 2 * 256;
        int[][] baseRelative = {
                {beforeOffsets, before},
                {align(indexEnd, 4), align(align(indexEnd, 4) + 4 * n, 8)},
                {align(indexEnd, 8), align(align(indexEnd, 8) + 4 * n, 8)}};
        for (int[] c : baseRelative) {
            OffsetsEncoding e = baseRelativeEncoding(d, b, c[0], n, c[1]);
            if (e != null) return new Layout(tokenTable, tokenIndex, markers, numMarkers, numSymsAt, n, names, c[0], c[1], e);
        }
        for (int off : new int[]{align(indexEnd, 4), align(indexEnd, 8)}) {
            if (pcRelativeAscending(d, b, off, n)) {
                return new Layout(tokenTable, tokenIndex, markers, numMarkers, numSymsAt, n, names, off, -1, OffsetsEncoding.PC_RELATIVE);
            }
        }
        return null;
    }

    private static int align(int v, int a) { return (v + a - 1) & -a; }

    /** BASE_RELATIVE or ABSOLUTE_PERCPU if the placement decodes to ascending addresses, else null. */
    private static OffsetsEncoding baseRelativeEncoding(byte[] d, ByteBuffer b, int offsets, int n, int relativeBaseAt) {
        if (offsets < 0 || relativeBaseAt < offsets + 4L * n || relativeBaseAt + 8L > d.length) return null;
        long relBase = b.getLong(relativeBaseAt);
        if (relBase != 0 && (relBase >>> 48) != 0xffffL) return null;
        boolean percpu = false;
        for (int i = 0; i < n && !percpu; i++) percpu = b.getInt(offsets + 4 * i) < 0;
        long prev = Long.MIN_VALUE;
        for (int i = 0; i < n; i++) {
            int v = b.getInt(offsets + 4 * i);
            // relative to relative_base; absolute per-CPU entries (small) sort below the kernel's
            long key = !percpu ? v & 0xffffffffL : v >= 0 ? v : (1L << 33) + (-1L - v);
            if (key < prev) return null;
            prev = key;
        }
        return percpu ? OffsetsEncoding.ABSOLUTE_PERCPU : OffsetsEncoding.BASE_RELATIVE;
    }

    private static boolean pcRelativeAscending(byte[] d, ByteBuffer b, int offsets, int n) {
        if (offsets < 0 || offsets + 4L * n > d.length) return false;
        long prev = Long.MIN_VALUE;
        for (int i = 0; i < n; i++) {
            long at = offsets + 4L * i + b.getInt(offsets + 4 * i);   // file offset of the symbol, relative
            if (at < prev) return false;
            prev = at;
        }
        return true;
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

    /** {@code entryAddress} maps a file offset to its link address (PC_RELATIVE only). */
    private static List<Symbol> decode(byte[] d, Layout l, long relBase, LongUnaryOperator entryAddress, String name) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(d);
        String[] tokens = new String[256];
        for (int i = 0; i < 256; i++) {
            int s = l.tokenTable + (b.getShort(l.tokenIndex + 2 * i) & 0xffff), e = s;
            while (d[e] != 0) e++;
            tokens[i] = new String(d, s, e - s, StandardCharsets.ISO_8859_1);
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
            int at = l.offsets + 4 * i;
            int off = b.getInt(at);
            long addr = switch (l.encoding) {
                case BASE_RELATIVE -> relBase + (off & 0xffffffffL);
                case ABSOLUTE_PERCPU -> off >= 0 ? off : relBase - 1 - off;
                case PC_RELATIVE -> entryAddress.applyAsLong(at) + off;
            };
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
        List<long[]> all = findAllRelative(d, type, accept);
        return all.size() == 1 ? all.get(0) : null;   // none, or ambiguous
    }

    /**
     * Of several relocations that each could be the relative_base slot's (an entry a multiple of
     * 2 MiB away from the slot passes the same test), the one whose link base puts the most
     * R_AARCH64_RELATIVE targets inside the Image: the kernel relocates only its own image, so
     * the true base covers them all and a base 2 MiB off leaves some out. Null when two tie.
     */
    private static long[] coveringMostRelocations(byte[] image, List<long[]> candidates, int slot, long size) {
        List<long[]> all = findAllRelative(image, R_AARCH64_RELATIVE, (off, addend) -> true);
        long[] best = null;
        long bestCount = -1, second = -1;
        for (long[] c : candidates) {
            long base = c[0] - slot;
            long n = all.stream().filter(r -> Long.compareUnsigned(r[0] - base, size) < 0).count();
            if (n > bestCount) { second = bestCount; bestCount = n; best = c; }
            else if (n > second) second = n;
        }
        return bestCount > second ? best : null;
    }

    /** Every distinct {r_offset, r_addend} such an entry has, in file order. */
    private static List<long[]> findAllRelative(byte[] d, int type, RelaFilter accept) {
        ByteBuffer b = ImageFiles.le(d);
        List<long[]> found = new ArrayList<>();
        for (int p = 8; p + 16 <= d.length; p += 8) {
            if (b.getLong(p) != type) continue;
            long off = b.getLong(p - 8);
            long addend = b.getLong(p + 8);
            if (!accept.test(off, addend)) continue;
            if (found.stream().noneMatch(f -> f[0] == off && f[1] == addend)) found.add(new long[]{off, addend});
        }
        return found;
    }
}
