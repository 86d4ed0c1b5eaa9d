package dev.kpemu.cli;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Shrinks a fuzz set to fewer definitions that still show a difference of one class, within a
 * budget of trials (each trial is a boot on each side). First the definitions the difference
 * names alone ({@code first}); then, from the last definition to the first, each one left out
 * when the set still differs without it (one pass: every definition left is needed, unless
 * the budget ran out first).
 */
public final class FuzzShrinker {
    /** The shrunk set and the trials it took. */
    public record Result<T>(List<T> items, int trials, boolean minimal) {}

    private FuzzShrinker() {}

    public static <T> Result<T> shrink(List<T> items, List<T> first, Predicate<List<T>> stillDiffers, int budget) {
        List<T> cur = new ArrayList<>(items);
        int trials = 0;
        if (!first.isEmpty() && first.size() < cur.size() && trials < budget) {
            trials++;
            if (stillDiffers.test(List.copyOf(first))) cur = new ArrayList<>(first);
        }
        for (int i = cur.size() - 1; i >= 0 && cur.size() > 1; i--) {
            if (trials >= budget) return new Result<>(List.copyOf(cur), trials, false);
            List<T> without = new ArrayList<>(cur);
            without.remove(i);
            trials++;
            if (stillDiffers.test(List.copyOf(without))) cur = without;
        }
        return new Result<>(List.copyOf(cur), trials, true);
    }
}
