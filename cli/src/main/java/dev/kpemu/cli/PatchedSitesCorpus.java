package dev.kpemu.cli;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelRelease;
import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * Definitions at the sites an x86 kernel rewrites while it boots ({@link
 * KernelTextTables#bootPatchedSites()}: alternatives, paravirt calls, retpoline, return-thunk and
 * call-depth sites), for recording Linux's own answers under QEMU ({@code
 * guest-images/record-error-log.sh ARCH patched}): per kind of site, a seeded sample of sites in
 * ordinary functions, each probed at the site's first byte, at its second byte, and at the first
 * instruction after it. The file's text says nothing certain about these: the running kernel's does.
 */
final class PatchedSitesCorpus {
    private PatchedSitesCorpus() {}

    static List<String> generate(Arch arch, KernelChoice kernel, long seed, int perKind) throws Exception {
        Path k = GuestImages.forRepository().kernel(arch, kernel);
        Kallsyms.KernelText kt = Kallsyms.load(k);
        SymbolTable syms = kt.symbols();
        KernelTextTables tables = KernelTextTables.read(arch, syms, kt.bytes());
        Optional<KernelTextTables.Range> init = tables.section("_sinittext", "_einittext");
        Map<String, List<KernelTextTables.Range>> byKind = new LinkedHashMap<>();
        for (KernelTextTables.Range r : tables.bootPatchedSites()) {
            Optional<Symbol> s = syms.lookup(r.start());
            if (s.isEmpty() || !s.get().text() || r.start() == s.get().address()) continue;
            if (init.isPresent() && init.get().contains(r.start())) continue;   // init text is freed before the probes
            if (s.get().name().startsWith("__") || tables.kprobeBlacklist().stream().anyMatch(b -> b.contains(r.start()))) continue;
            if (r.end() - s.get().address() >= s.get().size()) continue;
            byKind.computeIfAbsent(r.name(), x -> new ArrayList<>()).add(r);
        }
        String release = KernelRelease.of(kt.bytes()).orElse("?");
        List<String> out = new ArrayList<>();
        out.add("# " + release + ": boot-patched sites, seed " + seed + ", " + perKind + " per kind (kpemu corpus patched-sites)");
        Random random = new Random(seed);
        for (var e : byKind.entrySet()) {
            List<KernelTextTables.Range> sites = new ArrayList<>(e.getValue());
            java.util.Collections.shuffle(sites, random);
            out.add("# " + e.getKey() + ": " + e.getValue().size() + " sites in ordinary functions");
            for (KernelTextTables.Range r : sites.subList(0, Math.min(perKind, sites.size()))) {
                Symbol s = syms.lookup(r.start()).orElseThrow();
                long off = r.start() - s.address();
                out.add("p " + s.name() + "+" + off);
                if (r.size() > 1) out.add("p " + s.name() + "+" + (off + 1));
                out.add("p " + s.name() + "+" + (r.end() - s.address()));
            }
        }
        return out;
    }
}
