package dev.kpemu.optprobes;

import dev.kpemu.image.OnDemandFileBytes;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * The optimizer's kernel tables ({@link KernelOptimizationInputs}) last read in this JVM, kept by
 * arch and symbol table (the same object: {@link dev.kpemu.image.KernelSymbolsInMemory} hands
 * every run on the same kernel file, build and cache one table): the rows of an exploration
 * ({@code kpemu faults}) share them instead of reading them a row (~13 ms CPU). They are a pure
 * function of the kernel file and are not changed once read, so parallel runs may share them.
 */
public final class KernelOptimizationInputsInMemory {
    private record Kept(Arch arch, SymbolTable syms, KernelOptimizationInputs inputs) {}

    private static Kept last;

    private KernelOptimizationInputsInMemory() {}

    /** As {@link KernelOptimizationInputs#read(Arch, SymbolTable, OnDemandFileBytes)}: {@code file} is the kernel file of {@code syms}. */
    public static KernelOptimizationInputs read(Arch arch, SymbolTable syms, OnDemandFileBytes file) {
        synchronized (KernelOptimizationInputsInMemory.class) {
            Kept k = last;
            if (k != null && k.arch() == arch && k.syms() == syms) return k.inputs();
        }
        KernelOptimizationInputs inputs = KernelOptimizationInputs.read(arch, syms, file);
        synchronized (KernelOptimizationInputsInMemory.class) {
            last = new Kept(arch, syms, inputs);
        }
        return inputs;
    }
}
