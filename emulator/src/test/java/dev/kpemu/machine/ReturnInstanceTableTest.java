package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The outstanding kretprobe instances' table the host keeps with the native code
 * ({@code kpemu_probe_hits.h} struct kpemu_kret_table): slots taken first-free, the scanned range
 * shrinking past freed ones, a full table refusing, as the native code's own take and free do.
 */
class ReturnInstanceTableTest {
    @Test
    void instancesTakeTheFirstFreeSlotAndTheScannedRangeEndsAtTheLastLiveOne() {
        PerCpuProbeHits hits = new PerCpuProbeHits(() -> 0);
        try {
            assertEquals(-1, hits.returnInstanceAdd(0x1000, 7, 0xffff0000L, 0), "no table before the returns are configured");
            hits.returnsRecorded(new boolean[] {true, false}, 3, -8, 3);
            assertTrue(hits.returnTableComplete(), "an empty table holds every instance");
            assertEquals(0, hits.returnInstanceAdd(0x1000, 7, 0xffff1000L, 0));
            assertEquals(1, hits.returnInstanceAdd(0x2000, 8, 0xffff2000L, 1));
            assertEquals(2, hits.returnInstanceAdd(0x3000, 9, 0xffff3000L, -1));
            assertArrayEquals(new long[] {0x2000, 8, 0xffff2000L, 1, 1}, hits.returnInstance(1));
            hits.returnInstanceRemove(1);
            assertEquals(3, hits.returnTableUsed(), "a hole below the last live slot stays scanned");
            assertEquals(1, hits.returnInstanceAdd(0x4000, 10, 0xffff4000L, 0), "the hole taken first");
            hits.returnInstanceCounter(1, -1);
            assertEquals(-1, hits.returnInstance(1)[3], "an orphaned instance's return is the host's");
            hits.returnInstanceRemove(2);
            assertEquals(2, hits.returnTableUsed());
            hits.returnInstanceRemove(1);
            hits.returnInstanceRemove(0);
            assertEquals(0, hits.returnTableUsed(), "nothing live: nothing scanned");
        } finally {
            hits.close();
        }
    }

    @Test
    void aFullTableRefusesAndIsNoLongerComplete() {
        PerCpuProbeHits hits = new PerCpuProbeHits(() -> 0);
        try {
            hits.returnsRecorded(new boolean[] {true}, 0, 0, 0);
            for (int i = 0; i < PerCpuProbeHits.TABLE_INSTANCES; i++) assertEquals(i, hits.returnInstanceAdd(0x1000 + 16L * i, 1, 2, 0));
            assertEquals(-1, hits.returnInstanceAdd(0x9000, 1, 2, 0), "no room");
            assertFalse(hits.returnTableComplete(), "an instance without a slot: no return matched natively");
            hits.returnInstancesComplete(true);
            assertTrue(hits.returnTableComplete());
        } finally {
            hits.close();
        }
    }
}
