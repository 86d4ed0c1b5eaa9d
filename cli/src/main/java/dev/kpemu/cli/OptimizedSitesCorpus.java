package dev.kpemu.cli;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Random;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Disassembly;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelRelease;
import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * Definitions whose jump optimization Linux decides, for recording which of them {@code
 * kprobes/list} shows {@code [OPTIMIZED]} once enabled ({@code guest-images/record-error-log.sh
 * --kprobes-list ARCH optimized}): per kind, a seeded sample of instruction boundaries in ordinary
 * functions — any boundary; boundaries up to 4 bytes before a {@code lock} prefix of
 * {@code .smp_locks} (the 5-byte jump's region then holds it); the same before an alternative
 * site; and before an exception-table instruction.
 */
final class OptimizedSitesCorpus {
    private OptimizedSitesCorpus() {}

    static List<String> generate(Arch arch, KernelChoice kernel, long seed, int perKind) throws Exception {
        Path k = GuestImages.forRepository().kernel(arch, kernel);
        Kallsyms.KernelText kt = Kallsyms.load(k);
        SymbolTable syms = kt.symbols();
        KernelTextTables tables = KernelTextTables.read(arch, syms, kt.bytes());
        Optional<KernelTextTables.Range> init = tables.section("_sinittext", "_einittext");
        List<Symbol> ordinary = new ArrayList<>();
        for (Symbol s : syms.symbols()) {
            if (!s.text() || s.size() < 16 || s.size() > 4096 || s.name().startsWith("__") || s.name().contains(".")) continue;
            if (init.isPresent() && init.get().contains(s.address())) continue;   // init text is freed before the probes
            if (tables.kprobeBlacklist().stream().anyMatch(b -> b.contains(s.address()))) continue;
            ordinary.add(s);
        }
        List<Long> alternatives = tables.bootPatchedSites().stream().filter(r -> r.name().equals("alternative"))
                .map(KernelTextTables.Range::start).toList();
        String release = KernelRelease.of(kt.bytes()).orElse("?");
        List<String> out = new ArrayList<>();
        out.add("# " + release + ": jump optimization's sites, seed " + seed + ", " + perKind + " per kind (kpemu corpus optimized-sites)");
        Random random = new Random(seed);
        try (Decoder dec = Decoder.open(arch)) {
            out.add("# any instruction boundary");
            List<Symbol> fns = new ArrayList<>(ordinary);
            Collections.shuffle(fns, random);
            int n = 0;
            for (Symbol s : fns) {
                if (n >= perKind) break;
                List<Long> b = boundaries(dec, syms, kt.bytes(), s);
                if (b.size() < 2) continue;
                out.add(definition(s, b.get(1 + random.nextInt(b.size() - 1))));
                n++;
            }
            sampleBefore(out, "lock prefix (.smp_locks)", List.copyOf(tables.smpLockSites()), dec, syms, kt.bytes(), ordinary, random, perKind);
            sampleBefore(out, "alternative site", alternatives, dec, syms, kt.bytes(), ordinary, random, perKind);
            sampleBefore(out, "exception-table instruction", List.copyOf(tables.exceptionTable()), dec, syms, kt.bytes(), ordinary, random, perKind);
            sampleBeyondCapstone(out, dec, syms, kt.bytes(), ordinary, random, perKind);
        }
        return out;
    }

    /** For a sample of {@code targets} in ordinary functions: a boundary 1 to 4 bytes before the target, or the target itself. */
    private static void sampleBefore(List<String> out, String kind, List<Long> targets, Decoder dec, SymbolTable syms, byte[] file,
                                     List<Symbol> ordinary, Random random, int perKind) {
        java.util.Set<Long> ok = new java.util.HashSet<>();
        for (Symbol s : ordinary) ok.add(s.address());
        List<Long> shuffled = new ArrayList<>(targets);
        Collections.shuffle(shuffled, random);
        out.add("# up to 4 bytes before a " + kind + ": " + targets.size() + " in the kernel");
        int n = 0;
        for (long t : shuffled) {
            if (n >= perKind) break;
            Optional<Symbol> s = syms.lookup(t);
            if (s.isEmpty() || !ok.contains(s.get().address()) || t == s.get().address()) continue;
            List<Long> near = boundaries(dec, syms, file, s.get()).stream()
                    .filter(b -> b > s.get().address() && b <= t && t - b < 5).toList();
            if (near.isEmpty()) continue;
            out.add(definition(s.get(), near.get(random.nextInt(near.size()))));
            n++;
        }
    }

    /** Mnemonics the x86 decoder gives instructions Capstone 5.0 does not decode (or decodes short), as Linux's decoder does. */
    private static final java.util.Set<String> BEYOND_CAPSTONE = java.util.Set.of("ud1", "lkgs", "serialize", "wrmsrns", "tdcall",
            "seamcall", "seamret", "seamops", "rmpupdate", "pvalidate", "rmpadjust", "psmash", "tilerelease");

    /** Probes at, and just after, instructions that Capstone 5.0 alone would not decode (or decode short). */
    private static void sampleBeyondCapstone(List<String> out, Decoder dec, SymbolTable syms, byte[] file, List<Symbol> ordinary,
                                             Random random, int perKind) {
        List<long[]> sites = new ArrayList<>();   // {function start, instruction, next boundary}
        for (Symbol s : ordinary) {
            OptionalLong off = syms.fileOffset(s.address());
            if (off.isEmpty() || off.getAsLong() + s.size() > file.length) continue;
            byte[] code = java.util.Arrays.copyOfRange(file, (int) off.getAsLong(), (int) (off.getAsLong() + s.size()));
            for (Instruction i : dec.decodeAll(code, s.address()).instructions())
                if (BEYOND_CAPSTONE.contains(i.mnemonic())) sites.add(new long[] {s.address(), i.address(), i.address() + i.length()});
        }
        Collections.shuffle(sites, random);
        out.add("# at and after an instruction Capstone 5.0 does not decode: " + sites.size() + " in ordinary functions");
        for (long[] site : sites.subList(0, Math.min(perKind, sites.size()))) {
            Symbol s = syms.lookup(site[0]).orElseThrow();
            out.add(definition(s, site[1]));
            if (site[2] < s.address() + s.size()) out.add(definition(s, site[2]));
        }
    }

    private static String definition(Symbol s, long at) {
        return "p " + s.name() + "+" + (at - s.address());
    }

    /** The function's instruction starts as the file holds them (empty when its bytes are not in the file). */
    private static List<Long> boundaries(Decoder dec, SymbolTable syms, byte[] file, Symbol s) {
        OptionalLong off = syms.fileOffset(s.address());
        if (off.isEmpty() || off.getAsLong() + s.size() > file.length) return List.of();
        byte[] code = java.util.Arrays.copyOfRange(file, (int) off.getAsLong(), (int) (off.getAsLong() + s.size()));
        Disassembly d = dec.decodeAll(code, s.address());
        List<Long> out = new ArrayList<>();
        for (Instruction i : d.instructions()) out.add(i.address());
        return out;
    }
}
