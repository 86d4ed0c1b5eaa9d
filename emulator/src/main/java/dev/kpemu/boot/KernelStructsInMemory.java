package dev.kpemu.boot;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;

/**
 * The kernel structures ({@link LinuxGuest#kernelStructs}: its BTF located and indexed) last read
 * in this JVM, kept by arch and symbol table (the same object for runs on the same kernel file,
 * build and cache: {@link dev.kpemu.image.KernelSymbolsInMemory}): the rows of an exploration
 * ({@code kpemu faults}) share them instead of locating and indexing the BTF a row (~15 ms CPU).
 * They are not changed once read (the BTF decodes its types lazily into equal immutable values),
 * so parallel runs may share them.
 */
public final class KernelStructsInMemory {
    private record Kept(Arch arch, SymbolTable syms, KernelStructs structs) {}

    private static Kept last;

    private KernelStructsInMemory() {}

    /** {@code guest}'s kernel structures, from memory when the last read was of the same arch and symbol table. */
    public static KernelStructs of(LinuxGuest guest) throws KernelImageException {
        SymbolTable syms = guest.symbols();
        synchronized (KernelStructsInMemory.class) {
            Kept k = last;
            if (k != null && k.arch() == guest.arch() && k.syms() == syms) return k.structs();
        }
        KernelStructs s = guest.kernelStructs();
        synchronized (KernelStructsInMemory.class) {
            last = new Kept(guest.arch(), syms, s);
        }
        return s;
    }
}
