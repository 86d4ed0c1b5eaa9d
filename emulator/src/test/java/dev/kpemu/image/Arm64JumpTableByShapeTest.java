package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.TreeSet;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.machine.Arch;

/**
 * arm64's {@code __jump_table} found by its shape when the symbols do not bound it (Debian's 6.1:
 * no CONFIG_KALLSYMS_ALL). Where the kernel's own symbols bound the table (Debian 13's 6.12,
 * unstable's 7.x), the shape finds exactly the sites the bounded table holds; on 6.1 it finds the
 * table whose sites Linux refused probes on (recorded: {@code jumplabel.arm64.commands}, replayed by
 * {@code CorpusDefectsTest}).
 */
@Tag("kernel")
class Arm64JumpTableByShapeTest {
    private static Kallsyms.KernelText kernel(String suite) throws Exception {
        return Kallsyms.load(GuestImages.forRepository().kernel(Arch.ARM64, RecordedKernels.choice(suite)));
    }

    @ParameterizedTest
    @ValueSource(strings = {"trixie", "sid"})
    void shapeFindsTheBoundedTable(String suite) throws Exception {
        Kallsyms.KernelText k = kernel(suite);
        KernelTextTables t = KernelTextTables.read(Arch.ARM64, k.symbols(), k.bytes());
        assertTrue(t.notes().stream().anyMatch(n -> n.matches("__jump_table: \\d+ entries")), suite + ": the symbols bound the table: " + t.notes());
        TreeSet<Long> bounded = starts(t.jumpLabels()), byShape = starts(t.arm64JumpTableByShape());
        assertTrue(bounded.size() > 1000, "the bounded table holds the kernel's static branches: " + bounded.size());
        TreeSet<Long> missing = new TreeSet<>(bounded), extra = new TreeSet<>(byShape);
        missing.removeAll(byShape);
        extra.removeAll(bounded);
        assertTrue(missing.isEmpty() && extra.isEmpty(), suite + ": " + bounded.size() + " sites in the table, " + byShape.size() + " by shape; missing "
                + missing.size() + " " + missing.stream().limit(5).map(k.symbols()::format).toList() + ", extra " + extra.size() + " "
                + extra.stream().limit(5).map(k.symbols()::format).toList());
    }

    @Test
    void linux61TableIsFoundByShape() throws Exception {
        Kallsyms.KernelText k = kernel("bookworm");
        KernelTextTables t = KernelTextTables.read(Arch.ARM64, k.symbols(), k.bytes());
        assertTrue(t.notes().contains("__jump_table: not bounded; " + t.jumpLabels().size() + " entries found by shape"), t.notes().toString());
        assertTrue(t.jumpLabels().size() > 1000, "found: " + t.jumpLabels().size());
        // the two NOPs Linux refused when the corpus (seed 11) was first recorded
        for (String site : List.of("___slab_alloc+816", "acct_collect+172")) {
            String[] f = site.split("\\+");
            long a = k.symbols().address(f[0]) + Long.parseLong(f[1]);
            assertTrue(t.jumpLabels().stream().anyMatch(r -> r.contains(a)), site + " is a static branch");
        }
    }

    private static TreeSet<Long> starts(List<KernelTextTables.Range> ranges) {
        TreeSet<Long> s = new TreeSet<>();
        for (KernelTextTables.Range r : ranges) s.add(r.start());
        return s;
    }
}
