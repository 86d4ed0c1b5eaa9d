package dev.kpemu.image;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.function.LongFunction;

/**
 * A kernel's {@link SymbolTable} kept between runs in a folder, one file per kernel file and kpemu
 * build (as {@link KernelTextTablesCache} keeps its text tables): decoding kallsyms from the file
 * (the token table searched for, then every name expanded) is about half of the symbols' cost in a
 * snapshot-started session. The caller names the kernel file (its digest) and the build; the file
 * is named by the kernel's digest and holds both, so another build's file is never read and is
 * replaced (at most one file per kernel file). A missing, unreadable or damaged file means
 * decoding again (and writing the file anew). What maps an address to a file offset is not kept: the caller gives it, from the
 * kept link base.
 */
public final class SymbolTableCache {
    private static final String MAGIC = "kpemu kernel symbols 1";

    /** Decodes the symbols from the kernel file. */
    public interface Decoder {
        SymbolTable decode() throws KernelImageException;
    }

    private SymbolTableCache() {}

    /**
     * The symbols, from {@code dir} when a file there holds them for {@code kernelDigest} and
     * {@code build}, else decoded (and kept); {@code fileOffsets}: the address-to-file-offset map
     * for a link base. A null {@code dir}, {@code kernelDigest} or {@code build}: always decoded.
     */
    public static SymbolTable read(String kernelDigest, String build, Path dir, LongFunction<LongFunction<OptionalLong>> fileOffsets,
                                   Decoder decoder) throws KernelImageException {
        if (dir == null || kernelDigest == null || build == null) return decoder.decode();
        String key = kernelDigest + " " + build;
        Path kept = dir.resolve(FileDigests.sha256Hex(kernelDigest.getBytes(StandardCharsets.UTF_8)) + ".symbols");
        try (InputStream raw = Files.newInputStream(kept);
             DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
            if (in.readUTF().equals(MAGIC) && in.readUTF().equals(key)) {
                String source = in.readUTF();
                long linkBase = in.readLong();
                int n = in.readInt();
                if (n < 0) throw new IOException("a negative count");
                List<Symbol> symbols = new ArrayList<>(n);
                for (int i = 0; i < n; i++) symbols.add(new Symbol(in.readUTF(), in.readLong(), in.readChar(), in.readLong()));
                return new SymbolTable(symbols, linkBase, fileOffsets.apply(linkBase), source);
            }
        } catch (IOException e) {
            // not kept yet, or damaged: decode
        }
        SymbolTable t = decoder.decode();
        KeptFile.write(kept, MAGIC, key, out -> writeTable(out, t));
        return t;
    }

    /** The table after the magic line and key: source, link base, then each symbol. */
    private static void writeTable(DataOutputStream out, SymbolTable t) throws IOException {
        out.writeUTF(t.source());
        out.writeLong(t.linkBase());
        out.writeInt(t.symbols().size());
        for (Symbol s : t.symbols()) {
            out.writeUTF(s.name());
            out.writeLong(s.address());
            out.writeChar(s.type());
            out.writeLong(s.size());
        }
    }
}
