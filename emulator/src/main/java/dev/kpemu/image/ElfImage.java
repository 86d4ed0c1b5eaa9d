package dev.kpemu.image;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A minimal little-endian ELF64 reader for kernel images: program headers (PT_LOAD segments),
 * section headers when present, and notes (from PT_NOTE segments, else SHT_NOTE sections),
 * including the Xen PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY = 18).
 */
public final class ElfImage {
    public static final int PT_LOAD = 1, PT_NOTE = 4;
    public static final int PF_X = 1, PF_W = 2, PF_R = 4;
    public static final int SHT_SYMTAB = 2, SHT_NOTE = 7, SHT_NOBITS = 8, SHT_DYNSYM = 11;
    public static final int SHF_WRITE = 1, SHF_ALLOC = 2, SHF_EXECINSTR = 4;
    public static final int SHN_UNDEF = 0, SHN_ABS = 0xfff1, SHN_COMMON = 0xfff2;
    public static final int STB_LOCAL = 0, STB_GLOBAL = 1, STB_WEAK = 2;
    public static final int STT_OBJECT = 1, STT_FUNC = 2, STT_SECTION = 3, STT_FILE = 4;
    public static final int XEN_ELFNOTE_PHYS32_ENTRY = 18;
    public static final int EM_X86_64 = 62, EM_AARCH64 = 183;

    public record Segment(int type, int flags, long offset, long vaddr, long paddr, long filesz, long memsz, long align) {
        public boolean isLoad() { return type == PT_LOAD; }
        public boolean executable() { return (flags & PF_X) != 0; }
        public boolean writable() { return (flags & PF_W) != 0; }
        public boolean containsVaddr(long va) { return Long.compareUnsigned(va - vaddr, memsz) < 0; }
        @Override public String toString() {
            return String.format("%s off=0x%x vaddr=0x%x paddr=0x%x filesz=0x%x memsz=0x%x %s%s%s",
                    type == PT_LOAD ? "LOAD" : type == PT_NOTE ? "NOTE" : "type" + type, offset, vaddr, paddr, filesz, memsz,
                    (flags & PF_R) != 0 ? "R" : "-", writable() ? "W" : "-", executable() ? "X" : "-");
        }
    }

    /** A section header; {@code link} is sh_link (for SHT_SYMTAB: the index of its string table). */
    public record Section(String name, int type, long flags, long addr, long offset, long size, int link) {
        public boolean alloc() { return (flags & SHF_ALLOC) != 0; }
        public boolean writable() { return (flags & SHF_WRITE) != 0; }
        public boolean executable() { return (flags & SHF_EXECINSTR) != 0; }
    }

    /** An Elf64_Sym of .symtab; {@code section} is st_shndx (SHN_ABS 0xfff1, SHN_UNDEF 0, ...). */
    public record ElfSymbol(String name, long value, long size, int bind, int kind, int section) {}

    public record Note(String name, int type, byte[] desc) {
        /** The descriptor as an unsigned little-endian number (4 or 8 bytes). */
        public long descValue() {
            ByteBuffer b = ImageFiles.le(desc);
            return desc.length >= 8 ? b.getLong(0) : desc.length >= 4 ? b.getInt(0) & 0xffffffffL : 0;
        }
    }

    private final String name;
    /** The file's bytes: read whole only when asked for when the image was opened from a file. */
    private final OnDemandFileBytes contents;
    private final int type;
    private final int machine;
    private final long entry;
    private final List<Segment> segments;
    private final List<Section> sections;
    private final List<Note> notes;

    private ElfImage(String name, OnDemandFileBytes contents, int type, int machine, long entry, List<Segment> segments,
                     List<Section> sections, List<Note> notes) {
        this.name = name; this.contents = contents; this.type = type; this.machine = machine;
        this.entry = entry; this.segments = segments; this.sections = sections; this.notes = notes;
    }

    /**
     * Opens an ELF file reading only its headers and notes (through a mapping closed before this
     * returns): the rest is read when {@link #bytes()} or {@link #copyFileRange} asks for it. A
     * 57 MiB vmlinux on the heap was a fifth of an x86-64 boot's peak memory, and a boot without
     * probes needs only its segments, copied once into guest RAM.
     */
    public static ElfImage read(Path path) throws KernelImageException {
        if (path != null && Files.isRegularFile(path)) {
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ); Arena arena = Arena.ofConfined()) {
                long size = ch.size();
                if (size >= 64 && size <= Integer.MAX_VALUE - 8) {
                    ByteBuffer b = ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena).asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
                    byte[] head = new byte[64];
                    b.get(0, head);
                    if (ImageFiles.isElf(head)) return parse(b, (int) size, head, null, path, path.toString());
                }
            } catch (IOException e) {
                // read it whole below, for the one-line error
            }
        }
        return parse(ImageFiles.read(path), path.toString());
    }

    public static ElfImage parse(byte[] d, String name) throws KernelImageException {
        return parse(ImageFiles.le(d), d.length, d, d, null, name);
    }

    /** {@code b}: the file's {@code len} bytes; {@code head}: at least its first 64 (the whole file when it is short). */
    private static ElfImage parse(ByteBuffer b, int len, byte[] head, byte[] data, Path file, String name) throws KernelImageException {
        byte[] d = head;
        if (!ImageFiles.isElf(d)) throw new KernelImageException(name + ": not an ELF file: it is " + ImageFiles.describe(d));
        if (len < 64) throw new KernelImageException(name + ": corrupt ELF: truncated header");
        if (d[4] != 2) throw new KernelImageException(name + ": not an ELF64 file (EI_CLASS " + d[4] + ")");
        if (d[5] != 1) throw new KernelImageException(name + ": big-endian ELF is not supported");
        int type = b.getShort(16) & 0xffff;
        int machine = b.getShort(18) & 0xffff;
        long entry = b.getLong(24);
        long phoff = b.getLong(32), shoff = b.getLong(40);
        int phentsize = b.getShort(54) & 0xffff, phnum = b.getShort(56) & 0xffff;
        int shentsize = b.getShort(58) & 0xffff, shnum = b.getShort(60) & 0xffff, shstrndx = b.getShort(62) & 0xffff;
        if (phnum > 0 && (phentsize < 56 || phoff < 0 || phoff + (long) phnum * phentsize > len)) {
            throw new KernelImageException(name + ": corrupt ELF: program headers lie outside the file");
        }
        List<Segment> segs = new ArrayList<>();
        for (int i = 0; i < phnum; i++) {
            int p = (int) (phoff + (long) i * phentsize);
            Segment s = new Segment(b.getInt(p), b.getInt(p + 4), b.getLong(p + 8), b.getLong(p + 16), b.getLong(p + 24),
                    b.getLong(p + 32), b.getLong(p + 40), b.getLong(p + 48));
            if (s.type == PT_LOAD && (s.offset < 0 || s.filesz < 0 || s.offset + s.filesz > len || Long.compareUnsigned(s.filesz, s.memsz) > 0)) {
                throw new KernelImageException(name + ": corrupt ELF: segment " + i + " (" + s + ") lies outside the " + len + "-byte file");
            }
            segs.add(s);
        }
        List<Section> secs = new ArrayList<>();
        if (shnum > 0 && shoff > 0 && shentsize >= 64 && shoff + (long) shnum * shentsize <= len) {
            long[][] raw = new long[shnum][];
            for (int i = 0; i < shnum; i++) {
                int p = (int) (shoff + (long) i * shentsize);
                raw[i] = new long[]{b.getInt(p) & 0xffffffffL, b.getInt(p + 4), b.getLong(p + 8), b.getLong(p + 16), b.getLong(p + 24), b.getLong(p + 32),
                        b.getInt(p + 40)};
            }
            long strOff = shstrndx < shnum ? raw[shstrndx][4] : -1, strSize = shstrndx < shnum ? raw[shstrndx][5] : 0;
            for (long[] r : raw) {
                String sn = "";
                if (strOff >= 0 && r[0] < strSize && strOff + r[0] < len) sn = cString(b, len, (int) (strOff + r[0]));
                secs.add(new Section(sn, (int) r[1], r[2], r[3], r[4], r[5], (int) r[6]));
            }
        }
        List<Note> notes = new ArrayList<>();
        boolean fromSegments = false;
        for (Segment s : segs) {
            if (s.type == PT_NOTE && s.offset + s.filesz <= len) { readNotes(b, s.offset, s.filesz, notes); fromSegments = true; }
        }
        if (!fromSegments) {
            for (Section s : secs) {
                if (s.type == SHT_NOTE && s.offset + s.size <= len) readNotes(b, s.offset, s.size, notes);
            }
        }
        return new ElfImage(name, data != null ? OnDemandFileBytes.inMemory(data, name) : OnDemandFileBytes.of(file, len), type, machine, entry, List.copyOf(segs), List.copyOf(secs), List.copyOf(notes));
    }

    private static void readNotes(ByteBuffer b, long off, long size, List<Note> out) {
        long p = off, end = off + size;
        while (p + 12 <= end) {
            int namesz = b.getInt((int) p), descsz = b.getInt((int) p + 4), ntype = b.getInt((int) p + 8);
            if (namesz < 0 || descsz < 0) return;
            long nameAt = p + 12, descAt = nameAt + align4(namesz), next = descAt + align4(descsz);
            if (next > end) return;
            byte[] nb = new byte[Math.max(0, namesz - 1)], desc = new byte[descsz];
            b.get((int) nameAt, nb);
            b.get((int) descAt, desc);
            out.add(new Note(new String(nb, StandardCharsets.ISO_8859_1), ntype, desc));
            p = next;
        }
    }

    private static long align4(long v) { return (v + 3) & ~3L; }

    private static String cString(ByteBuffer b, int len, int off) {
        int e = off;
        while (e < len && b.get(e) != 0) e++;
        byte[] out = new byte[e - off];
        b.get(off, out);
        return new String(out, StandardCharsets.ISO_8859_1);
    }

    private static String cString(byte[] d, int off) {
        int e = off;
        while (e < d.length && d[e] != 0) e++;
        return new String(d, off, e - off, StandardCharsets.ISO_8859_1);
    }

    public String name() { return name; }
    public int type() { return type; }
    public int machine() { return machine; }
    public long entry() { return entry; }
    public List<Segment> segments() { return segments; }
    public List<Segment> loadSegments() { return segments.stream().filter(Segment::isLoad).toList(); }
    public List<Section> sections() { return sections; }
    public List<Note> notes() { return notes; }
    /** The whole file (not copied; read on the first call when the image was opened from a file). */
    public byte[] bytes() { return contents.bytes(); }

    /** The file's size in bytes. */
    public long length() { return contents.length(); }

    /** The file's bytes, read where asked until something needs them whole. */
    public OnDemandFileBytes contents() { return contents; }

    /** Hands {@code length} bytes of the file from {@code offset} to {@code sink}, in chunks, without reading the rest. */
    public void copyFileRange(long offset, long length, FileBytes.ChunkSink sink) throws KernelImageException {
        contents.copyRange(offset, length, sink);
    }

    public Optional<Section> section(String sectionName) {
        return sections.stream().filter(s -> s.name.equals(sectionName)).findFirst();
    }

    /**
     * The symbols of {@code .symtab} (empty for a stripped file), index 0 (the null symbol)
     * left out. Names come from the string table the section's sh_link names.
     */
    public List<ElfSymbol> symbols() throws KernelImageException {
        return symbols(SHT_SYMTAB);
    }

    /** The symbols of {@code .dynsym} (a dynamically linked program's or library's exports; empty when it has none). */
    public List<ElfSymbol> dynamicSymbols() throws KernelImageException {
        return symbols(SHT_DYNSYM);
    }

    private List<ElfSymbol> symbols(int sectionType) throws KernelImageException {
        Optional<Section> tab = sections.stream().filter(s -> s.type == sectionType).findFirst();
        if (tab.isEmpty()) return List.of();
        Section st = tab.get();
        if (st.link <= 0 || st.link >= sections.size()) throw new KernelImageException(name + ": corrupt ELF: " + st.name + " names no string table");
        Section str = sections.get(st.link);
        byte[] data = bytes();
        if (st.offset < 0 || st.offset + st.size > data.length || str.offset < 0 || str.offset + str.size > data.length) {
            throw new KernelImageException(name + ": corrupt ELF: " + st.name + " or its string table lies outside the file");
        }
        ByteBuffer b = ImageFiles.le(data);
        List<ElfSymbol> out = new ArrayList<>((int) (st.size / 24));
        for (long p = st.offset + 24; p + 24 <= st.offset + st.size; p += 24) {
            int nameOff = b.getInt((int) p);
            int info = data[(int) p + 4] & 0xff;
            int shndx = b.getShort((int) p + 6) & 0xffff;
            String n = nameOff >= 0 && nameOff < str.size ? cString(data, (int) (str.offset + nameOff)) : "";
            out.add(new ElfSymbol(n, b.getLong((int) p + 8), b.getLong((int) p + 16), info >> 4, info & 0xf, shndx));
        }
        return out;
    }

    /** XEN_ELFNOTE_PHYS32_ENTRY: the physical 32-bit PVH entry point, if the image has one. */
    public OptionalLong pvhEntry() {
        for (Note n : notes) if (n.name.equals("Xen") && n.type == XEN_ELFNOTE_PHYS32_ENTRY) return OptionalLong.of(n.descValue());
        return OptionalLong.empty();
    }

    public Optional<Segment> loadSegmentContaining(long vaddr) {
        for (Segment s : segments) if (s.isLoad() && s.containsVaddr(vaddr)) return Optional.of(s);
        return Optional.empty();
    }

    /** File offset of a virtual address that has file bytes behind it (not BSS). */
    public OptionalLong fileOffsetOf(long vaddr) {
        for (Segment s : segments) {
            if (s.isLoad() && Long.compareUnsigned(vaddr - s.vaddr, s.filesz) < 0) return OptionalLong.of(s.offset + (vaddr - s.vaddr));
        }
        return OptionalLong.empty();
    }

    /** Virtual address of a file offset inside a PT_LOAD segment. */
    public OptionalLong vaddrOfFileOffset(long off) {
        for (Segment s : segments) {
            if (s.isLoad() && off >= s.offset && off < s.offset + s.filesz) return OptionalLong.of(s.vaddr + (off - s.offset));
        }
        return OptionalLong.empty();
    }

    /** {@code n} bytes at a virtual address (zeros past a segment's file size). */
    public byte[] bytesAt(long vaddr, int n) throws KernelImageException {
        Segment s = loadSegmentContaining(vaddr).orElseThrow(() ->
                new KernelImageException(name + ": address 0x" + Long.toHexString(vaddr) + " is in no PT_LOAD segment"));
        byte[] out = new byte[n];
        byte[] data = bytes();
        long rel = vaddr - s.vaddr;
        for (int i = 0; i < n && rel + i < s.memsz; i++) {
            if (rel + i < s.filesz) out[i] = data[(int) (s.offset + rel + i)];
        }
        return out;
    }

    @Override
    public String toString() {
        return String.format("ELF[%s machine %d entry 0x%x, %d PT_LOAD]", name, machine, entry, loadSegments().size());
    }
}
