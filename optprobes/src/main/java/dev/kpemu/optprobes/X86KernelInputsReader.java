package dev.kpemu.optprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;

import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/** Reads x86-64's {@link KernelOptimizationInputs} from vmlinux (the tables its class comment lists). */
final class X86KernelInputsReader {
    private X86KernelInputsReader() {}

    /** Reads only the tables' bytes from {@code file}. */
    static KernelOptimizationInputs read(SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file) {
        KernelOptimizationInputs.Reader r = new KernelOptimizationInputs.Reader(syms, file);
        List<String> notes = new ArrayList<>();
        TreeSet<Long> ex = new TreeSet<>();
        r.table("__start___ex_table", "__stop___ex_table", 12, notes, (at, b) -> ex.add(at + b.getInt(0)));
        TreeSet<Long> ftrace = new TreeSet<>();
        r.table("__start_mcount_loc", "__stop_mcount_loc", 8, notes, (at, b) -> ftrace.add(b.getLong(0)));
        List<TextRange> reserved = new ArrayList<>();
        r.table("__start___jump_table", "__stop___jump_table", 16, notes,
                (at, b) -> reserved.add(TextRange.of(at + b.getInt(0), 5)));
        r.table("__start_static_call_sites", "__stop_static_call_sites", 8, notes,
                (at, b) -> reserved.add(TextRange.of(at + b.getInt(0), 5)));
        TextRange thunks = null;
        Optional<Symbol> ts = syms.byName("__indirect_thunk_start"), te = syms.byName("__indirect_thunk_end");
        if (ts.isPresent() && te.isPresent()) thunks = new TextRange(ts.get().address(), te.get().address());
        else notes.add("no __indirect_thunk_start/end in kallsyms");
        return new KernelOptimizationInputs(Arch.X86_64, ex, ftrace, KernelOptimizationInputs.merge(reserved), KernelOptimizationInputs.idle(syms, KernelOptimizationInputs.X86_IDLE),
                KernelOptimizationInputs.starts(syms, KernelOptimizationInputs.X86_RETURN_TO_USER), thunks, false, notes, null);
    }
}
