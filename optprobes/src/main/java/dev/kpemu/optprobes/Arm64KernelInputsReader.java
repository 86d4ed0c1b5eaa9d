package dev.kpemu.optprobes;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;
import java.util.TreeSet;

import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.kprobes.ArchKernelText;
import dev.kpemu.machine.Arch;

/** Reads arm64's {@link KernelOptimizationInputs} from the Image (ftrace sites from the code; see its class comment). */
final class Arm64KernelInputsReader {
    static KernelOptimizationInputs read(SymbolTable syms, byte[] file) {
        List<String> notes = new ArrayList<>();
        notes.add("arm64: __ex_table and __jump_table are not bounded in kallsyms (no CONFIG_KALLSYMS_ALL): not read");
        TreeSet<Long> ftrace = new TreeSet<>();
        ArchKernelText entry = ArchKernelText.of(Arch.ARM64);
        for (Symbol s : syms.symbols()) {
            if (!s.text() || s.size() < 8) continue;
            OptionalLong off = syms.fileOffset(s.address());
            if (off.isEmpty() || off.getAsLong() + 12 > file.length) continue;
            int o = (int) off.getAsLong();
            int site = entry.ftraceSite(Arrays.copyOfRange(file, o, o + entry.entryBytes()));
            if (site >= 0) {
                // both instructions of the patchable pair: the second is the call site
                ftrace.add(s.address() + site - 4);
                ftrace.add(s.address() + site);
            }
        }
        notes.add("arm64: " + ftrace.size() / 2 + " patchable-function-entry ftrace sites found by their code");
        notes.add("arm64: every nop and b of a candidate function is reserved (possible jump-label sites)");
        return new KernelOptimizationInputs(Arch.ARM64, new TreeSet<>(), ftrace, List.of(), KernelOptimizationInputs.idle(syms, KernelOptimizationInputs.ARM64_IDLE),
                KernelOptimizationInputs.starts(syms, KernelOptimizationInputs.ARM64_RETURN_TO_USER), null, true, notes,
                function -> possibleJumpLabelSites(syms, file, ftrace, function));
    }

    /** arm64 {@code nop}. */
    private static final int NOP = 0xd503201f;

    /**
     * Every {@code nop} and unconditional {@code b} of {@code function} in the file except its ftrace
     * pair: the possible jump-label sites (the table itself is not bounded in kallsyms; see
     * {@link KernelOptimizationInputs}); the whole function when its bytes are not in the file.
     */
    static List<TextRange> possibleJumpLabelSites(SymbolTable syms, byte[] file, java.util.Set<Long> ftraceSites, TextRange function) {
        OptionalLong off = syms.fileOffset(function.start());
        long len = function.end() - function.start();
        if (off.isEmpty() || off.getAsLong() + len > file.length || len > (1 << 20)) return List.of(function);
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(file).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        List<TextRange> out = new ArrayList<>();
        for (long i = 0; i + 4 <= len; i += 4) {
            int w = b.getInt((int) (off.getAsLong() + i));
            long at = function.start() + i;
            if ((w == NOP || (w & 0xfc00_0000) == 0x1400_0000) && !ftraceSites.contains(at)) out.add(TextRange.of(at, 4));
        }
        return out;
    }

    private Arm64KernelInputsReader() {}
}
