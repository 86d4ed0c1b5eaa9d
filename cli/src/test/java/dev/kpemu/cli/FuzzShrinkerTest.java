package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.List;
import java.util.function.Predicate;

import org.junit.jupiter.api.Test;

/**
 * The shrinker on definitions of the recorded corpus (x86_64 6.1, {@code corpus.events}' first
 * twelve after the markers), with a difference that needs two of them together (an optimized
 * probe next to another in the same function: {@code lookup_mnt+83} and {@code lookup_mnt+91}).
 */
class FuzzShrinkerTest {
    static List<String> recorded() throws Exception {
        List<String> defs = CorpusGenerator.definitions(Files.readAllLines(FuzzClassifierTest.REFERENCE.resolve("corpus.events")));
        return defs.subList(2, 14);
    }

    @Test
    void shrinksToTheDefinitionsTheDifferenceNeeds() throws Exception {
        List<String> set = recorded();
        String a = set.stream().filter(d -> d.startsWith("p:c2 lookup_mnt+83")).findFirst().orElseThrow();
        String b = set.stream().filter(d -> d.startsWith("p:c3 lookup_mnt+91")).findFirst().orElseThrow();
        int[] calls = {0};
        Predicate<List<String>> differs = s -> { calls[0]++; return s.contains(a) && s.contains(b); };
        FuzzShrinker.Result<String> r = FuzzShrinker.shrink(set, List.of(a), differs, 100);
        assertEquals(List.of(a, b), r.items());
        assertTrue(r.minimal());
        assertEquals(calls[0], r.trials());
        // the culprit alone (the first trial) did not reproduce, every other one-out trial followed
        assertEquals(1 + set.size(), r.trials());
    }

    @Test
    void theCulpritAloneEndsTheSearchEarlyAndTheBudgetIsKept() throws Exception {
        List<String> set = recorded();
        String a = set.get(5);
        FuzzShrinker.Result<String> alone = FuzzShrinker.shrink(set, List.of(a), s -> s.contains(a), 100);
        assertEquals(List.of(a), alone.items());
        assertEquals(1, alone.trials());
        FuzzShrinker.Result<String> cut = FuzzShrinker.shrink(set, List.of(), s -> s.contains(a), 3);
        assertEquals(3, cut.trials());
        assertFalse(cut.minimal());
        assertEquals(set.size() - 3, cut.items().size());
    }
}
