package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.image.KernelTextTables.Range;

class RangeIndexTest {
    private static final Range BIG = new Range(0xffffffff81000000L, 0xffffffff81001000L, "big_function");
    private static final Range SITE = new Range(0xffffffff81000100L, 0xffffffff81000105L, "jump_label");
    private static final Range LATER = new Range(0xffffffff81002000L, 0xffffffff81002005L, "static_call");

    @Test
    void findsTheFirstContainingRangeInListOrderAsALinearScanWould() {
        RangeIndex index = new RangeIndex(List.of(LATER, SITE, BIG));
        assertEquals(SITE, index.find(0xffffffff81000102L), "SITE comes before BIG in the list");
        assertEquals(BIG, index.find(0xffffffff81000105L), "just past SITE's end, still inside BIG");
        assertEquals(BIG, index.find(0xffffffff81000000L));
        assertEquals(LATER, index.find(0xffffffff81002004L));
        assertNull(index.find(0xffffffff81002005L), "an end is exclusive");
        assertNull(index.find(0xffffffff80ffffffL));
        assertNull(index.find(0xffffffff81001800L), "between the ranges");
    }

    @Test
    void aBigRangeEarlierInTheListWinsOverASmallerOneInsideIt() {
        RangeIndex index = new RangeIndex(List.of(BIG, SITE));
        assertEquals(BIG, index.find(0xffffffff81000102L));
        assertNull(new RangeIndex(List.of()).find(0xffffffff81000102L));
    }
}
