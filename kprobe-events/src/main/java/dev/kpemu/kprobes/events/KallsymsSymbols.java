package dev.kpemu.kprobes.events;

import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.LongToIntFunction;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.kprobes.ArchKernelText;
import dev.kpemu.machine.Arch;

/**
 * {@link KernelSymbols} over the kallsyms tables decoded from a kernel image (vmlinux only: the
 * default guests load no modules). A function entry is offset 0 of a text symbol, or offset 4 of
 * an x86 function that begins with an IBT landing pad ({@code endbr64}), as x86's
 * {@code arch_adjust_kprobe_addr} decides; the landing pad is read from the image's own text.
 */
public final class KallsymsSymbols implements KernelSymbols {
    private final SymbolTable table;
    private final LongToIntFunction landingPadAt;
    private final Btf btf;
    private final SystemMap systemMap;

    /** @param landingPadAt the length of the landing pad a probe skips at the function at an address (x86 IBT's {@code endbr}), 0 when none */
    public KallsymsSymbols(SymbolTable table, LongToIntFunction landingPadAt) {
        this(table, landingPadAt, null, null);
    }

    private KallsymsSymbols(SymbolTable table, LongToIntFunction landingPadAt, Btf btf, SystemMap systemMap) {
        this.table = table;
        this.landingPadAt = landingPadAt;
        this.btf = btf;
        this.systemMap = systemMap;
    }

    /** The same symbols with the kernel's BTF, for the types BTF gives (an untyped {@code $retval} on 6.10+). */
    public KallsymsSymbols withBtf(Btf btf) { return new KallsymsSymbols(table, landingPadAt, btf, systemMap); }

    /** The same symbols with {@code map}'s data symbols for wprobes ({@link #lookupDataName}); check {@link SystemMap#mismatch} first. */
    public KallsymsSymbols withSystemMap(SystemMap map) { return new KallsymsSymbols(table, landingPadAt, btf, map); }

    @Override public OptionalLong lookupDataName(String name) {
        OptionalLong k = lookupName(name);
        return k.isPresent() || systemMap == null ? k : systemMap.address(name);
    }

    @Override public Optional<FetchType> btfReturnType(String function) {
        return btf == null ? Optional.empty() : BtfFetchTypes.returnType(btf, function);
    }

    @Override public Btf btf() { return btf; }

    /**
     * For a kernel file: landing pads a probe skips ({@link ArchKernelText#probeSkip}: x86 IBT's)
     * are read from {@code kernelFile} through the table's file offsets.
     */
    public static KallsymsSymbols forKernel(SymbolTable table, Arch arch, byte[] kernelFile) {
        return forKernel(table, arch, dev.kpemu.image.OnDemandFileBytes.inMemory(kernelFile, "kernel file"));
    }

    /** As above, reading each function's entry bytes from the file as asked. */
    public static KallsymsSymbols forKernel(SymbolTable table, Arch arch, dev.kpemu.image.OnDemandFileBytes kernelFile) {
        ArchKernelText entry = ArchKernelText.of(arch);
        return new KallsymsSymbols(table, a -> {
            var off = table.fileOffset(a);
            if (off.isEmpty() || off.getAsLong() < 0 || off.getAsLong() >= kernelFile.length()) return 0;
            long i = off.getAsLong();
            return entry.probeSkip(kernelFile.read(i, (int) Math.min(kernelFile.length() - i, entry.entryBytes())));
        });
    }

    public SymbolTable table() { return table; }

    @Override public int countSymbols(String name) {
        int colon = name.indexOf(':');
        return colon >= 0 ? 0 : table.allByName(name).size();
    }

    @Override public FuncEntry funcEntry(String symbol, long offset) {
        if (symbol.indexOf(':') >= 0) return FuncEntry.NOT_FOUND; // no modules in the image
        var s = table.byName(symbol);
        if (s.isEmpty()) return FuncEntry.NOT_FOUND;
        boolean entry = offset == 0 || offset == landingPadAt.applyAsInt(s.get().address());
        return entry ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
    }

    @Override public OptionalLong lookupName(String name) {
        var s = table.byName(name);
        return s.isPresent() ? OptionalLong.of(s.get().address()) : OptionalLong.empty();
    }

    @Override public Optional<Symbol> symbolAt(long address) {
        return table.lookup(address).map(s -> new Symbol(s.name(), s.address(), s.size(), null));
    }
}
