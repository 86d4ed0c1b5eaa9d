package dev.kpemu.optprobes;

/** Thrown when a detour or patch cannot be built (for example {@link Refusal.Reason#OUT_OF_RANGE}). */
public final class OptimizationRefusedException extends RuntimeException {
    private final Refusal refusal;

    public OptimizationRefusedException(Refusal refusal) {
        super(refusal.toString());
        this.refusal = refusal;
    }

    public Refusal refusal() {
        return refusal;
    }
}
