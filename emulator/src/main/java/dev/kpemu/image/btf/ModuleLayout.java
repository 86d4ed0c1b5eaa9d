package dev.kpemu.image.btf;

import java.util.NoSuchElementException;

/**
 * Where a loaded module keeps what {@code kallsyms} reads about it, from the kernel's own BTF:
 * {@code struct module}'s {@code name}, its {@code kallsyms} pointer ({@code struct mod_kallsyms}:
 * {@code symtab}, {@code num_symtab}, {@code strtab}) and the extent of its text. Kernels before
 * 6.4 describe the text by {@code core_layout}/{@code init_layout} ({@code base}, {@code text_size});
 * later ones by {@code mem[MOD_TEXT]}/{@code mem[MOD_INIT_TEXT]} ({@code base}, {@code size}).
 *
 * @param textBase      offsets in {@code struct module} of the core and init text bases (pointers)
 * @param textSize      offsets of the matching sizes ({@code unsigned int})
 * @param extentBase    offsets of the base of every memory region the module owns (core and init, text and data)
 * @param extentSize    offsets of their total sizes ({@code unsigned int})
 */
public record ModuleLayout(long name, int nameLength, long kallsyms, long symtab, long numSymtab, long strtab,
                           long[] textBase, long[] textSize, long[] extentBase, long[] extentSize) {
    /** {@code MOD_TEXT} … {@code MOD_INIT_RODATA} of {@code enum mod_mem_type} (6.4+). */
    private static final int MOD_MEM_TYPES = 7, MOD_TEXT = 0, MOD_INIT_TEXT = 4;

    /** The layout of this kernel's {@code struct module}, or an exception naming what BTF lacks. */
    public static ModuleLayout of(Btf btf) throws BtfFormatException {
        try {
            Btf.Field name = btf.offsetOf("module", "name");
            long kallsyms = btf.offsetOf("module", "kallsyms").offset();
            long symtab = btf.offsetOf("mod_kallsyms", "symtab").offset();
            long num = btf.offsetOf("mod_kallsyms", "num_symtab").offset();
            long strtab = btf.offsetOf("mod_kallsyms", "strtab").offset();
            if (btf.member("module", "mem").isPresent()) {
                long[] tb = {at(btf, "mem[" + MOD_TEXT + "].base"), at(btf, "mem[" + MOD_INIT_TEXT + "].base")};
                long[] ts = {at(btf, "mem[" + MOD_TEXT + "].size"), at(btf, "mem[" + MOD_INIT_TEXT + "].size")};
                long[] eb = new long[MOD_MEM_TYPES], es = new long[MOD_MEM_TYPES];
                for (int i = 0; i < MOD_MEM_TYPES; i++) {
                    eb[i] = at(btf, "mem[" + i + "].base");
                    es[i] = at(btf, "mem[" + i + "].size");
                }
                return new ModuleLayout(name.offset(), (int) name.size(), kallsyms, symtab, num, strtab, tb, ts, eb, es);
            }
            long[] tb = {at(btf, "core_layout.base"), at(btf, "init_layout.base")};
            long[] ts = {at(btf, "core_layout.text_size"), at(btf, "init_layout.text_size")};
            long[] es = {at(btf, "core_layout.size"), at(btf, "init_layout.size")};
            return new ModuleLayout(name.offset(), (int) name.size(), kallsyms, symtab, num, strtab, tb, ts, tb, es);
        } catch (NoSuchElementException | IllegalArgumentException e) {
            throw new BtfFormatException("the kernel's BTF does not describe struct module as kpemu expects: " + e.getMessage());
        }
    }

    private static long at(Btf btf, String path) { return btf.offsetOf("module", path).offset(); }
}
