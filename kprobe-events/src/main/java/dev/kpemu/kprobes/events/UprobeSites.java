package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Places uprobes in the address spaces that map their files ({@link UprobeMappings}) and tells
 * their hits. A probe at file offset O goes where each executable mapping of its file puts O;
 * every address gets one host instruction breakpoint ({@code Machine.addInstructionBreakpoints}: no guest memory written,
 * so a {@code read()} of the file, the page cache and other processes see the original bytes),
 * shared by every mm that maps the file there. At a hit, the current page-table root
 * (x86-64 CR3, arm64 TTBR0_EL1 without its ASID) tells the mm: only the probes placed in that mm
 * fire, and only while it still maps the file there. An instruction breakpoint stops at any
 * instruction, a block start or inside a block (docs/uprobe-notes.md).
 */
public final class UprobeSites {
    /** One hit: the probe, the user address, the mm. */
    public record Hit(UprobeDef probe, long address, long mm) {}

    private record Site(UprobeDef probe, long mm) {}

    private final Machine machine;
    private final UprobeMappings mappings;
    private final List<UprobeDef> probes;
    private final long mmPgd;
    private final Consumer<Hit> onHit;
    /** address → the probes placed there, per mm (in registration order). */
    private final Map<Long, Set<Site>> sites = new HashMap<>();
    /** mm → the physical address of its top-level page table. */
    private final Map<Long, Long> roots = new HashMap<>();

    public UprobeSites(Machine machine, Btf btf, UprobeMappings mappings, List<UprobeDef> probes, Consumer<Hit> onHit) {
        this.machine = Objects.requireNonNull(machine);
        this.mappings = Objects.requireNonNull(mappings);
        this.probes = List.copyOf(probes);
        this.onHit = Objects.requireNonNull(onHit);
        this.mmPgd = btf.offsetOf("mm_struct", "pgd").bitOffset() / 8;
        mappings.onMapped(this::mapped);
        mappings.onCopied(this::mapped);
    }

    private void mapped(UprobeMappings.Mapping m) {
        if (!m.exec()) return;
        List<Long> added = new ArrayList<>();
        for (UprobeDef p : probes) {
            if (!p.file().equals(m.file())) continue;
            long va = m.addressOf(p.offset());
            if (va < 0) continue;
            roots.put(m.mm(), machine.translateOrThrow(machine.readVirtualLong(m.mm() + mmPgd)).physical());
            Set<Site> at = sites.computeIfAbsent(va, k -> new java.util.LinkedHashSet<>());
            if (at.isEmpty()) added.add(va);
            at.add(new Site(p, m.mm()));
        }
        // one translation-cache flush for the whole mapping, not one per address
        if (!added.isEmpty()) machine.addInstructionBreakpoints(added.stream().mapToLong(Long::longValue).toArray(), (mc, address) -> { hit(address); return true; });
    }

    private void hit(long address) {
        Set<Site> at = sites.get(address);
        if (at == null) return;
        long root = pageTableRoot();
        List<Site> stale = new ArrayList<>();
        for (Site s : at) {
            Long r = roots.get(s.mm());
            if (r == null || r != root) continue;
            if (!stillMapped(s, address)) { stale.add(s); continue; }
            onHit.accept(new Hit(s.probe(), address, s.mm()));
        }
        stale.forEach(at::remove);
    }

    private boolean stillMapped(Site s, long address) {
        for (UprobeMappings.Mapping m : mappings.mappings(s.mm()))
            if (m.exec() && m.file().equals(s.probe().file()) && m.addressOf(s.probe().offset()) == address) return true;
        return false;
    }

    /** The current user page-table root, as a physical address. */
    private long pageTableRoot() {
        if (machine.arch() == Arch.X86_64) return machine.engine().regRead(X86Reg.CR3) & 0x000f_ffff_ffff_f000L;
        return machine.engine().regRead(Arm64Reg.TTBR0_EL1) & 0x0000_ffff_ffff_fffeL;
    }
}
