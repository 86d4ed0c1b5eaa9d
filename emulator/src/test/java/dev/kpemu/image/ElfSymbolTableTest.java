package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Symbols from an unstripped vmlinux's .symtab, on a small ELF built here. */
class ElfSymbolTableTest {
    static final long TEXT = 0xffffffff81000000L;
    static final int SHF_W = 1, SHF_A = 2, SHF_X = 4;

    record Sec(String name, int type, int flags, long addr, int size) {}
    record Sym(String name, int bind, int kind, int shndx, long value, long size) {}

    static final List<Sec> SECTIONS = List.of(
            new Sec("", 0, 0, 0, 0),
            new Sec(".text", 1, SHF_A | SHF_X, TEXT, 0x1000),
            new Sec(".rodata", 1, SHF_A, TEXT + 0x1000, 0x100),
            new Sec(".data", 1, SHF_A | SHF_W, TEXT + 0x1100, 0x100),
            new Sec(".data..percpu", 1, SHF_A | SHF_W, 0, 0x40),
            new Sec(".bss", 8, SHF_A | SHF_W, TEXT + 0x1200, 0x100),
            new Sec(".comment", 1, 0, 0, 0x10),
            new Sec(".smp_locks", 1, SHF_W, TEXT + 0x1300, 0));        // empty: the linker dropped SHF_ALLOC (a UP kernel's)

    static final List<Sym> SYMBOLS = List.of(
            new Sym("vmlinux.o", 0, 4, 0xfff1, 0, 0),                 // STT_FILE
            new Sym("", 0, 3, 1, TEXT, 0),                             // STT_SECTION
            new Sym("_text", 1, 0, 1, TEXT, 0),
            new Sym("_stext", 1, 0, 1, TEXT, 0),
            new Sym("start_kernel", 1, 2, 1, TEXT + 0x100, 0x80),
            new Sym("helper", 0, 2, 1, TEXT + 0x180, 0x20),
            new Sym("arch_hook", 2, 2, 1, TEXT + 0x200, 0x10),        // weak function: W
            new Sym("weak_table", 2, 1, 3, TEXT + 0x1180, 8),         // weak object: V
            new Sym("$x", 0, 0, 1, TEXT + 0x100, 0),                  // mapping symbol: left out
            new Sym(".Ltmp1", 0, 0, 1, TEXT + 0x110, 0),              // local label: left out
            new Sym("__crc_start_kernel", 1, 0, 0xfff1, 0x1234, 0),   // absolute: left out
            new Sym("__kcfi_typeid_helper", 1, 0, 0xfff1, 0x5678, 0), // left out
            new Sym("linux_banner", 1, 1, 2, TEXT + 0x1000, 0x40),
            new Sym("table", 0, 1, 3, TEXT + 0x1100, 0x10),
            new Sym("zeroed", 1, 1, 5, TEXT + 0x1200, 0x10),
            new Sym("__per_cpu_start", 1, 0, 4, 0, 0),
            new Sym("cpu_number", 1, 1, 4, 0x20, 4),
            new Sym("__per_cpu_end", 1, 0, 4, 0x40, 0),
            new Sym("printk", 1, 2, 0, 0, 0),                         // undefined: left out
            new Sym("build_note", 0, 1, 6, 0, 0),                     // non-allocated, read-only ('n'): left out
            new Sym("__smp_locks", 1, 0, 7, TEXT + 0x1300, 0));      // non-allocated, writable: nm's '?', kept as kallsyms keeps it

    static byte[] elf() {
        ByteArrayOutputStream strtab = new ByteArrayOutputStream(), symtab = new ByteArrayOutputStream(), shstr = new ByteArrayOutputStream();
        strtab.write(0);
        shstr.write(0);
        symtab.writeBytes(new byte[24]);
        for (Sym s : SYMBOLS) {
            int nameOff = strtab.size();
            strtab.writeBytes((s.name + "\0").getBytes(StandardCharsets.US_ASCII));
            ByteBuffer e = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            e.putInt(nameOff).put((byte) (s.bind << 4 | s.kind)).put((byte) 0).putShort((short) s.shndx).putLong(s.value).putLong(s.size);
            symtab.writeBytes(e.array());
        }
        List<Sec> all = new ArrayList<>(SECTIONS);
        int textOff = 0x1000;
        ByteBuffer b = ByteBuffer.allocate(0x4000).order(ByteOrder.LITTLE_ENDIAN);
        int symOff = 0x2400, strOff = symOff + symtab.size(), shstrOff = 0x3000, shOff = 0x3400;
        b.put(symOff, symtab.toByteArray()).put(strOff, strtab.toByteArray());
        List<String> names = new ArrayList<>();
        for (Sec s : all) names.add(s.name);
        names.addAll(List.of(".symtab", ".strtab", ".shstrtab"));
        int[] nameOffs = new int[names.size()];
        for (int i = 0; i < names.size(); i++) { nameOffs[i] = shstr.size(); shstr.writeBytes((names.get(i) + "\0").getBytes(StandardCharsets.US_ASCII)); }
        b.put(shstrOff, shstr.toByteArray());
        // ELF header
        b.put(0, new byte[]{0x7f, 'E', 'L', 'F', 2, 1, 1});
        b.putShort(16, (short) 2).putShort(18, (short) ElfImage.EM_X86_64).putInt(20, 1).putLong(24, TEXT)
                .putLong(32, 64).putLong(40, shOff).putShort(52, (short) 64).putShort(54, (short) 56).putShort(56, (short) 1)
                .putShort(58, (short) 64).putShort(60, (short) names.size()).putShort(62, (short) (names.size() - 1));
        // one PT_LOAD: .text .. .data at file offset 0x1000
        b.putInt(64, 1).putInt(68, 7).putLong(72, textOff).putLong(80, TEXT).putLong(88, 0x1000000).putLong(96, 0x1200).putLong(104, 0x1300).putLong(112, 0x1000);
        for (int i = 0; i < names.size(); i++) {
            int p = shOff + 64 * i;
            b.putInt(p, nameOffs[i]);
            if (i < all.size()) {
                Sec s = all.get(i);
                b.putInt(p + 4, s.type).putLong(p + 8, s.flags).putLong(p + 16, s.addr)
                        .putLong(p + 24, i == 0 ? 0 : s.addr >= TEXT ? textOff + (s.addr - TEXT) : 0x2000).putLong(p + 32, s.size);
            } else if (names.get(i).equals(".symtab")) {
                b.putInt(p + 4, ElfImage.SHT_SYMTAB).putLong(p + 24, symOff).putLong(p + 32, symtab.size()).putInt(p + 40, i + 1).putLong(p + 56, 24);
            } else if (names.get(i).equals(".strtab")) {
                b.putInt(p + 4, 3).putLong(p + 24, strOff).putLong(p + 32, strtab.size());
            } else {
                b.putInt(p + 4, 3).putLong(p + 24, shstrOff).putLong(p + 32, shstr.size());
            }
        }
        return b.array();
    }

    @Test
    void symtabReadsLikeProcKallsyms() throws Exception {
        ElfImage elf = ElfImage.parse(elf(), "vmlinux");
        SymbolTable t = Kallsyms.fromElf(elf);
        List<String> lines = t.symbols().stream().map(Symbol::toString).toList();
        assertEquals(List.of(
                "0000000000000000 A __per_cpu_start",
                "0000000000000020 A cpu_number",
                "0000000000000040 A __per_cpu_end",
                "ffffffff81000000 T _text",
                "ffffffff81000000 T _stext",
                "ffffffff81000100 T start_kernel",
                "ffffffff81000180 t helper",
                "ffffffff81000200 W arch_hook",
                "ffffffff81001000 R linux_banner",
                "ffffffff81001100 d table",
                "ffffffff81001180 V weak_table",
                "ffffffff81001200 B zeroed",
                "ffffffff81001300 ? __smp_locks"), lines);
        // sizes are kallsyms' (distance to the next symbol), not st_size: %pS prints those
        assertEquals("start_kernel+0x10/0x80", t.format(TEXT + 0x110));
        assertEquals("helper+0x0/0x80", t.format(TEXT + 0x180));
        assertEquals(TEXT, t.linkBase());
        assertEquals(0x1000 + 0x100, t.fileOffset(TEXT + 0x100).getAsLong());
        assertTrue(t.source().endsWith("(.symtab)"), t.source());
    }

    @Test
    void strippedElfFallsBackToTheKallsymsTables() throws Exception {
        byte[] d = elf();
        ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN).putShort(60, (short) 0);   // no section headers
        ElfImage elf = ElfImage.parse(d, "stripped");
        assertTrue(elf.symbols().isEmpty());
        String m = assertThrows(KernelImageException.class, () -> Kallsyms.fromElf(elf)).getMessage();
        assertTrue(m.contains("no kallsyms tables found") && m.contains("kernel built without CONFIG_KALLSYMS"), m);
    }
}
