package dev.kpemu.optprobes;

import java.util.List;

/** The outcome of {@link OptimizationSafety#check}: the displaced region, or why there is none. */
public sealed interface Verdict {

    /** True if the probe may be optimized now. */
    default boolean optimizable() {
        return this instanceof Optimizable;
    }

    /** The probe may be optimized; {@code region} is what the jump displaces. */
    record Optimizable(DisplacedRegion region) implements Verdict {}

    /**
     * The probe stays a breakpoint probe. Every rule that failed is listed, in Linux's order of
     * checking (structural prerequisites — not in the function, undecodable, not on a boundary,
     * region past the function end — stop the analysis, so they are listed alone).
     *
     * @param refusals at least one
     * @param region   the displaced region when it could be determined, else null
     */
    record Refused(List<Refusal> refusals, DisplacedRegion region) implements Verdict {
        public Refused {
            refusals = List.copyOf(refusals);
            if (refusals.isEmpty()) throw new IllegalArgumentException("no refusal");
        }

        /** The first rule that refused. */
        public Refusal.Reason reason() {
            return refusals.getFirst().reason();
        }

        /** True if {@code reason} is among the refusals. */
        public boolean has(Refusal.Reason reason) {
            return refusals.stream().anyMatch(r -> r.reason() == reason);
        }

        /**
         * The permanent refusals alone (what stays true whatever the probe's state), or this when
         * every refusal is temporary: a probe refused for good is listed by these, not by the
         * state (disabled, a post handler) it happened to be in when it was checked.
         */
        public Refused permanentPart() {
            List<Refusal> p = refusals.stream().filter(r -> !r.reason().temporary()).toList();
            return p.isEmpty() ? this : new Refused(p, region);
        }

        /** True if every refusal is temporary: the probe becomes optimizable once they clear. */
        public boolean onlyTemporary() {
            return refusals.stream().allMatch(r -> r.reason().temporary());
        }
    }
}
