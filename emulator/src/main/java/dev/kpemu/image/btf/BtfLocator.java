package dev.kpemu.image.btf;

import dev.kpemu.image.BzImage;
import dev.kpemu.image.ElfImage;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelFiles;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Finds the kernel's own BTF (the {@code .BTF} section of CONFIG_DEBUG_INFO_BTF kernels) in a
 * kernel image:
 *
 * <ul>
 * <li>an ELF vmlinux: the {@code .BTF} section when section headers are present;</li>
 * <li>otherwise (raw arm64 {@code Image}, stripped ELF): the {@code __start_BTF} /
 *     {@code __stop_BTF} symbols when kallsyms has them (only with CONFIG_KALLSYMS_ALL);</li>
 * <li>otherwise a scan for the header: magic 0xeB9F (little-endian), version 1, hdr_len 24,
 *     a type section then a string section that fit in the file, and a full parse. The blob
 *     that parses with the most types wins; other candidates are reported in
 *     {@link Found#detail()}.</li>
 * </ul>
 */
public final class BtfLocator {
    private BtfLocator() {}

    public enum Method { ELF_SECTION, SYMBOLS, MAGIC_SCAN }

    /**
     * The BTF found in an image.
     *
     * @param fileOffset offset of the BTF header in the image file
     * @param size       bytes of the blob (header + sections)
     * @param vaddr      link-time virtual address of the blob, if known
     */
    public record Found(Btf btf, long fileOffset, long size, OptionalLong vaddr, Method method, String detail) {
        @Override public String toString() {
            return String.format("BTF at file offset 0x%x, %d bytes%s, by %s: %d types%s", fileOffset, size,
                    vaddr.isPresent() ? String.format(" (vaddr 0x%x)", vaddr.getAsLong()) : "", method, btf.typeCount(),
                    detail.isEmpty() ? "" : " (" + detail + ")");
        }
    }

    /** The BTF of Debian's kernel for {@code arch} (x86_64: the extracted vmlinux; arm64: the Image). */
    public static Found forGuest(GuestImages images, Arch arch) throws KernelImageException {
        return forGuest(images, arch, arch == Arch.X86_64 ? null : images.symbols(arch));
    }

    /** As {@link #forGuest(GuestImages, Arch)}, with the kernel's symbols already decoded (may be null). */
    public static Found forGuest(GuestImages images, Arch arch, SymbolTable symbols) throws KernelImageException {
        if (arch == Arch.X86_64) return fromElf(ElfImage.read(images.vmlinux(arch)), symbols);
        Path k = images.kernel(arch);
        return fromArm64Image(KernelFiles.readArm64Image(k), k.toString(), symbols);
    }

    /** An ELF vmlinux: the .BTF section, else __start_BTF from {@code symbols} (may be null), else a scan. */
    public static Found fromElf(ElfImage elf, SymbolTable symbols) throws KernelImageException {
        Optional<ElfImage.Section> sec = elf.section(".BTF");
        if (sec.isPresent()) {
            ElfImage.Section s = sec.get();
            if (s.offset() < 0 || s.size() < 0 || s.offset() + s.size() > elf.length()) {
                throw new BtfFormatException(elf.name() + ": the .BTF section [0x" + Long.toHexString(s.offset()) + ", +" + s.size() + ") lies outside the file");
            }
            Btf btf = Btf.parse(elf.contents().read(s.offset(), (int) s.size()), 0, (int) s.size(), elf.name() + " .BTF");
            return new Found(btf, s.offset(), btf.header().totalLength(), OptionalLong.of(s.addr()), Method.ELF_SECTION,
                    btf.header().totalLength() == s.size() ? "" : "section is " + s.size() + " bytes");
        }
        byte[] d = elf.bytes();
        Found viaSymbols = fromSymbols(d, elf.name(), symbols);
        if (viaSymbols != null) return viaSymbols;
        Found f = scan(d, elf.name());
        OptionalLong va = elf.vaddrOfFileOffset(f.fileOffset());
        return new Found(f.btf(), f.fileOffset(), f.size(), va, f.method(), f.detail());
    }

    /**
     * As {@link #fromArm64Image(byte[], String, SymbolTable)}, reading only the blob when kallsyms
     * places it, else scanning the file in windows (neither keeps the Image on the heap).
     */
    public static Found fromArm64Image(dev.kpemu.image.OnDemandFileBytes image, String name, SymbolTable symbols) throws KernelImageException {
        if (image.loaded()) return fromArm64Image(image.bytes(), name, symbols);
        if (symbols != null) {
            Optional<Symbol> start = symbols.byName("__start_BTF"), stop = symbols.byName("__stop_BTF");
            OptionalLong off = start.isEmpty() ? OptionalLong.empty() : symbols.fileOffset(start.get().address());
            if (off.isPresent() && off.getAsLong() >= 0 && off.getAsLong() < image.length()) {
                long limit = image.length() - off.getAsLong();
                if (stop.isPresent()) limit = Math.min(limit, stop.get().address() - start.get().address());
                Btf btf = Btf.parse(image.read(off.getAsLong(), (int) limit), name + " __start_BTF");
                return new Found(btf, off.getAsLong(), btf.header().totalLength(), OptionalLong.of(start.get().address()), Method.SYMBOLS, "");
            }
        }
        Found f = scan(image, name);
        OptionalLong va = symbols == null ? OptionalLong.empty() : OptionalLong.of(symbols.linkBase() + f.fileOffset());
        String detail = (symbols == null ? "" : "no __start_BTF in kallsyms") + (f.detail().isEmpty() || symbols == null ? f.detail() : "; " + f.detail());
        return new Found(f.btf(), f.fileOffset(), f.size(), va, f.method(), detail);
    }

    /** As {@link #scan(byte[], String)}, over the file in windows: each candidate blob is read and parsed alone. */
    public static Found scan(dev.kpemu.image.OnDemandFileBytes file, String name) throws BtfFormatException {
        List<String> rejected = new ArrayList<>();
        Found[] best = {null};
        int[] others = {0};
        file.scan(Btf.HEADER_LEN, (windowAt, d, from, to, len) -> {
            ByteBuffer b = ByteBuffer.wrap(d, 0, len).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = from; i < to && i + Btf.HEADER_LEN <= len; i++) {
                if (d[i] != (byte) 0x9f || d[i + 1] != (byte) 0xeb || d[i + 2] != 1) continue;
                if (b.getInt(i + 4) != Btf.HEADER_LEN) continue;
                long typeOff = b.getInt(i + 8) & 0xffffffffL, typeLen = b.getInt(i + 12) & 0xffffffffL;
                long strOff = b.getInt(i + 16) & 0xffffffffL, strLen = b.getInt(i + 20) & 0xffffffffL;
                long total = Btf.HEADER_LEN + Math.max(typeOff + typeLen, strOff + strLen);
                long p = windowAt + i;
                if (typeLen == 0 || strLen == 0 || total > file.length() - p) continue;
                try {
                    Btf btf = Btf.parse(file.read(p, (int) total), name + "+0x" + Long.toHexString(p));
                    if (best[0] == null || btf.typeCount() > best[0].btf().typeCount()) {
                        if (best[0] != null) others[0]++;
                        best[0] = new Found(btf, p, total, OptionalLong.empty(), Method.MAGIC_SCAN, "");
                    } else {
                        others[0]++;
                    }
                } catch (BtfFormatException e) {
                    if (rejected.size() < 3) rejected.add(String.format("0x%x: %s", p, e.getMessage()));
                }
            }
            return false;
        });
        if (best[0] == null) {
            throw new BtfFormatException(name + ": no BTF found (kernel without CONFIG_DEBUG_INFO_BTF?)"
                    + (rejected.isEmpty() ? "" : "; rejected candidates: " + String.join("; ", rejected)));
        }
        String detail = others[0] == 0 ? "" : others[0] + " smaller blob(s) also parse";
        return new Found(best[0].btf(), best[0].fileOffset(), best[0].size(), OptionalLong.empty(), Method.MAGIC_SCAN, detail);
    }

    /** A raw arm64 Image: __start_BTF from {@code symbols} (may be null) when present, else a scan. */
    public static Found fromArm64Image(byte[] image, String name, SymbolTable symbols) throws KernelImageException {
        Found viaSymbols = fromSymbols(image, name, symbols);
        if (viaSymbols != null) return viaSymbols;
        Found f = scan(image, name);
        OptionalLong va = symbols == null ? OptionalLong.empty() : OptionalLong.of(symbols.linkBase() + f.fileOffset());
        String detail = (symbols == null ? "" : "no __start_BTF in kallsyms") + (f.detail().isEmpty() || symbols == null ? f.detail() : "; " + f.detail());
        return new Found(f.btf(), f.fileOffset(), f.size(), va, f.method(), detail);
    }

    private static Found fromSymbols(byte[] d, String name, SymbolTable symbols) throws KernelImageException {
        if (symbols == null) return null;
        Optional<Symbol> start = symbols.byName("__start_BTF"), stop = symbols.byName("__stop_BTF");
        if (start.isEmpty()) return null;
        OptionalLong off = symbols.fileOffset(start.get().address());
        if (off.isEmpty()) return null;
        long limit = d.length - off.getAsLong();
        if (stop.isPresent()) limit = Math.min(limit, stop.get().address() - start.get().address());
        Btf btf = Btf.parse(d, (int) off.getAsLong(), (int) limit, name + " __start_BTF");
        return new Found(btf, off.getAsLong(), btf.header().totalLength(), OptionalLong.of(start.get().address()), Method.SYMBOLS, "");
    }

    /** Scans any byte image for a BTF header and returns the largest blob that parses completely. */
    public static Found scan(byte[] d, String name) throws BtfFormatException {
        ByteBuffer b = ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN);
        List<String> rejected = new ArrayList<>();
        Found best = null;
        int others = 0;
        for (int p = 0; p + Btf.HEADER_LEN <= d.length; p++) {
            if (d[p] != (byte) 0x9f || d[p + 1] != (byte) 0xeb || d[p + 2] != 1) continue;
            if (b.getInt(p + 4) != Btf.HEADER_LEN) continue;
            long typeOff = b.getInt(p + 8) & 0xffffffffL, typeLen = b.getInt(p + 12) & 0xffffffffL;
            long strOff = b.getInt(p + 16) & 0xffffffffL, strLen = b.getInt(p + 20) & 0xffffffffL;
            long total = Btf.HEADER_LEN + Math.max(typeOff + typeLen, strOff + strLen);
            if (typeLen == 0 || strLen == 0 || total > d.length - (long) p) continue;
            try {
                Btf btf = Btf.parse(d, p, (int) total, name + "+0x" + Integer.toHexString(p));
                if (best == null || btf.typeCount() > best.btf().typeCount()) {
                    if (best != null) others++;
                    best = new Found(btf, p, total, OptionalLong.empty(), Method.MAGIC_SCAN, "");
                } else {
                    others++;
                }
            } catch (BtfFormatException e) {
                if (rejected.size() < 3) rejected.add(String.format("0x%x: %s", p, e.getMessage()));
            }
        }
        if (best == null) {
            throw new BtfFormatException(name + ": no BTF found (kernel without CONFIG_DEBUG_INFO_BTF?)"
                    + (rejected.isEmpty() ? "" : "; rejected candidates: " + String.join("; ", rejected)));
        }
        String detail = others == 0 ? "" : others + " smaller blob(s) also parse";
        return new Found(best.btf(), best.fileOffset(), best.size(), OptionalLong.empty(), Method.MAGIC_SCAN, detail);
    }

    /**
     * Reads a kernel file (ELF vmlinux, x86 bzImage, arm64 Image, Image.gz or EFI zboot) and finds its BTF; kallsyms is
     * used when it decodes.
     */
    public static Found read(Path kernel) throws KernelImageException {
        byte[] d = readFile(kernel);
        boolean elf = d.length > 4 && d[0] == 0x7f && d[1] == 'E' && d[2] == 'L' && d[3] == 'F';
        boolean bz = d.length > 0x206 && d[0x202] == 'H' && d[0x203] == 'd' && d[0x204] == 'r' && d[0x205] == 'S';
        if (elf || bz) {
            ElfImage e = elf ? ElfImage.parse(d, kernel.toString()) : BzImage.parse(d, kernel.toString()).vmlinux();
            SymbolTable syms;
            try {
                syms = Kallsyms.fromElf(e);
            } catch (KernelImageException ex) {
                syms = null;
            }
            return fromElf(e, syms);
        }
        byte[] image = KernelFiles.arm64Image(d, kernel.toString());
        SymbolTable syms;
        try {
            syms = Kallsyms.fromArm64Image(image, kernel.toString());
        } catch (KernelImageException ex) {
            syms = null;
        }
        return fromArm64Image(image, kernel.toString(), syms);
    }

    private static byte[] readFile(Path p) throws KernelImageException {
        try {
            return dev.kpemu.image.FileBytes.read(p);
        } catch (IOException e) {
            throw new KernelImageException(p + ": cannot read: " + e.getMessage(), e);
        }
    }
}
