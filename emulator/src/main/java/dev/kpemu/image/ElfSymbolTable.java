package dev.kpemu.image;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The kernel's symbols from an unstripped vmlinux's own {@code .symtab}, shaped like the
 * kallsyms tables the build would make from it (CONFIG_KALLSYMS_ALL), so that names, addresses
 * and type letters read like /proc/kallsyms:
 *
 * <ul>
 * <li>type letters as {@code nm} gives them: by section (executable {@code t}, NOBITS
 *     {@code b}, read-only {@code r}, writable {@code d}; {@code A} for SHN_ABS), {@code W}/{@code V}
 *     for weak functions/objects, upper case when global;</li>
 * <li>left out as scripts/kallsyms (and scripts/mksysmap) leave them out: section and file
 *     symbols, undefined and non-allocated ones, absolute ones (except the few it keeps), and
 *     the assembler/linker/tooling names ({@code $x}/{@code $d} mapping symbols, also inside the
 *     arm64 {@code __pi_}/{@code __kvm_nvhe_} namespaces, {@code .L}
 *     labels, {@code __crc_}, {@code __efistub_}, {@code __kcfi_typeid_}, the export strings
 *     {@code __kstrtab_}/{@code __kstrtabns_} that scripts/mksysmap drops, linker thunks);</li>
 * <li>x86-64 kernels whose per-CPU area is linked at 0 ({@code __per_cpu_start} = 0, as
 *     CONFIG_KALLSYMS_ABSOLUTE_PERCPU kernels up to 6.14 are): symbols from
 *     {@code __per_cpu_start} to {@code __per_cpu_end} get type {@code A}, as kallsyms shows them.</li>
 * </ul>
 *
 * <p>Sizes are NOT the ELF st_size: like the kernel's kallsyms (and so %pS), a symbol's size is
 * the distance to the next higher symbol address ({@link SymbolTable#withSizes}).
 */
public final class ElfSymbolTable {
    private static final List<String> KEPT_ABSOLUTE = List.of("__kernel_syscall_via_break", "__kernel_syscall_via_epc", "__kernel_sigtramp", "__gp");
    private static final List<String> IGNORED_PREFIXES = List.of("$", ".L", "__crc_", "__efistub_",
            "__pi_$", "__pi_.L", "__kvm_nvhe_$", "__kvm_nvhe_.L",                   // arm64 PIE / nVHE KVM namespaces
            "__AArch64ADRPThunk_", "__ARMV5PILongThunk_", "__ARMV7PILongThunk_", "__ThumbV7PILongThunk_", "__LA25Thunk_",
            "__microLA25Thunk_", "__kcfi_typeid_", "__kvm_nvhe___kcfi_typeid_", "__pi___kcfi_typeid_", "__kstrtab_", "__kstrtabns_");
    private static final List<String> IGNORED_SUFFIXES = List.of("_from_arm", "_from_thumb", "_veneer");
    private static final List<String> IGNORED_INFIXES = List.of(".long_branch.", ".plt_branch.");
    private static final List<String> IGNORED_NAMES = List.of("_SDA_BASE_", "_SDA2_BASE_", "L0");

    private ElfSymbolTable() {}

    /** The table, or empty when the file has no (or an empty) {@code .symtab}. */
    public static Optional<SymbolTable> read(ElfImage elf) throws KernelImageException {
        List<ElfImage.ElfSymbol> raw = elf.symbols();
        if (raw.isEmpty()) return Optional.empty();
        List<Symbol> out = new ArrayList<>(raw.size());
        for (ElfImage.ElfSymbol s : raw) {
            if (s.kind() == ElfImage.STT_SECTION || s.kind() == ElfImage.STT_FILE || s.name().isEmpty()) continue;
            char type = nmType(elf, s);
            if (ignored(s.name(), type)) continue;
            out.add(new Symbol(s.name(), s.value(), type, 0));
        }
        if (out.isEmpty()) return Optional.empty();
        if (elf.machine() == ElfImage.EM_X86_64) out = perCpuAbsolute(out);
        long base = out.stream().filter(s -> s.name().equals("_text")).mapToLong(Symbol::address).findFirst()
                .orElse(elf.loadSegments().isEmpty() ? 0 : elf.loadSegments().get(0).vaddr());
        return Optional.of(SymbolTable.of(out, base, elf::fileOffsetOf, elf.name() + " (.symtab)"));
    }

    /** The letter nm prints for a symbol. */
    static char nmType(ElfImage elf, ElfImage.ElfSymbol s) {
        int shndx = s.section();
        if (shndx == ElfImage.SHN_UNDEF) return s.bind() == ElfImage.STB_WEAK ? (s.kind() == ElfImage.STT_OBJECT ? 'v' : 'w') : 'U';
        if (s.bind() == ElfImage.STB_WEAK) return s.kind() == ElfImage.STT_OBJECT ? 'V' : 'W';
        char c;
        if (shndx == ElfImage.SHN_ABS) c = 'a';
        else if (shndx == ElfImage.SHN_COMMON) c = 'c';
        else if (shndx >= elf.sections().size()) c = '?';
        else {
            ElfImage.Section sec = elf.sections().get(shndx);
            if (!sec.alloc()) {
                // as binutils classifies a section without SHF_ALLOC: debugging 'N', no contents 'b',
                // read-only 'n', else '?' (a built kernel's empty .smp_locks and .data_nosave lose
                // SHF_ALLOC but keep SHF_WRITE; scripts/kallsyms keeps their '?' symbols)
                if (sec.name().startsWith(".debug")) c = 'N';
                else if (sec.type() == ElfImage.SHT_NOBITS) c = 'b';
                else if (!sec.writable()) c = 'n';
                else c = '?';
            }
            else if (sec.executable()) c = 't';
            else if (sec.type() == ElfImage.SHT_NOBITS) c = 'b';
            else if (!sec.writable()) c = 'r';
            else c = 'd';
        }
        return s.bind() == ElfImage.STB_LOCAL || c == 'N' ? c : Character.toUpperCase(c);
    }

    /** Whether scripts/kallsyms would leave the symbol out of the tables. */
    static boolean ignored(String name, char type) {
        if (type == 'U' || type == 'u' || type == 'v' || type == 'w' || type == 'N' || type == 'n') return true;
        if (Character.toUpperCase(type) == 'A' && !KEPT_ABSOLUTE.contains(name)) return true;
        if (IGNORED_NAMES.contains(name)) return true;
        for (String p : IGNORED_PREFIXES) if (name.startsWith(p)) return true;
        for (String p : IGNORED_SUFFIXES) if (name.endsWith(p)) return true;
        for (String p : IGNORED_INFIXES) if (name.contains(p)) return true;
        return false;
    }

    /** With the per-CPU area linked at 0, its symbols are absolute: type 'A'. */
    private static List<Symbol> perCpuAbsolute(List<Symbol> syms) {
        long start = -1, end = -1;
        for (Symbol s : syms) {
            if (s.name().equals("__per_cpu_start")) start = s.address();
            if (s.name().equals("__per_cpu_end")) end = s.address();
        }
        if (start != 0 || end <= 0) return syms;
        List<Symbol> out = new ArrayList<>(syms.size());
        for (Symbol s : syms) {
            boolean percpu = Long.compareUnsigned(s.address(), end) <= 0;
            out.add(percpu ? new Symbol(s.name(), s.address(), 'A', 0) : s);
        }
        return out;
    }
}
