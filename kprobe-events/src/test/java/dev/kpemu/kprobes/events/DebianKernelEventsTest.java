package dev.kpemu.kprobes.events;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The pieces the CLI connects, on the Debian kernels themselves (no boot): the task layout
 * from their BTF, the reference definitions against their kallsyms, and which comparison mode
 * the recorded traces get with the cached kernel build.
 */
@Tag("kernel")
class DebianKernelEventsTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void layoutSymbolsAndReferenceDefinitions(Arch a) throws Exception {
        GuestImages images = GuestImages.forRepository();
        SymbolTable table = images.symbols(a);
        TaskLayout layout = TaskLayout.of(KernelStructs.forGuest(images, a));
        assertEquals(a, layout.arch());
        assertTrue(layout.commOffset() > 0 && layout.pidOffset() > 0 && layout.tgidOffset() == layout.pidOffset() + 4, layout.toString());
        if (a == Arch.X86_64) assertTrue(layout.gsOffset() > 0, layout.toString());
        System.out.println(a.linuxName() + ": " + layout);

        KernelSymbols symbols = new KallsymsSymbols(table, address -> 0);
        Path ref = RecordedReferenceTest.reference();
        org.junit.jupiter.api.Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        GuestImages.Guest g = images.guest(a);
        ReferenceTrace r = ReferenceTrace.read(ref, a, "open", g.release());
        ProbeParser parser = new ProbeParser(a, Dialect.LINUX_6_1, symbols);
        for (String d : r.definitions()) CompiledProbe.compile((TraceProbe) parser.parse(d), a, symbols);
        // the probe point the reference printed is the cached kernel's do_sys_openat2 when the build is the same
        TraceComparator.Mode mode = TraceComparator.mode(r, g.version().get("release"), g.version().get("version"));
        System.out.println(a.linuxName() + ": cached kernel " + g.version() + " vs reference " + r.kernelRelease() + " " + r.packageVersion() + " -> " + mode);
        long size = symbols.symbolAt(symbols.lookupName("do_sys_openat2").orElseThrow()).orElseThrow().size();
        if (mode == TraceComparator.Mode.EXACT)
            assertEquals("do_sys_openat2+0x0/0x" + Long.toHexString(size), r.events().getFirst().probePoint());
        List<String> names = r.eventNames();
        assertEquals(List.of("myopen", "myret"), names);
    }
}
