package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

/** The hit path's address index agrees with a map through any sequence of puts and removes. */
class AddressIndexTest {
    @Test
    void agreesWithAMapThroughRandomPutsAndRemoves() {
        SplittableRandom r = new SplittableRandom(30);
        AddressIndex<String> index = new AddressIndex<>();
        Map<Long, String> want = new HashMap<>();
        List<Long> keys = new ArrayList<>();
        // kernel-like addresses: 16-byte aligned functions in one region, and a few far apart
        for (int i = 0; i < 600; i++) keys.add(0xffff_ffff_8100_0000L + 16L * r.nextInt(4096));
        for (int i = 0; i < 50; i++) keys.add(r.nextLong());
        keys.add(0L);
        keys.add(-1L);
        for (int step = 0; step < 40_000; step++) {
            long k = keys.get(r.nextInt(keys.size()));
            switch (r.nextInt(3)) {
                case 0 -> assertEquals(want.put(k, "v" + step), index.put(k, "v" + step));
                case 1 -> assertEquals(want.remove(k), index.remove(k));
                default -> assertEquals(want.get(k), index.get(k));
            }
            assertEquals(want.size(), index.size());
        }
        for (long k : keys) assertEquals(want.get(k), index.get(k));
        index.clear();
        for (long k : keys) assertNull(index.get(k));
        assertEquals(0, index.size());
    }
}
