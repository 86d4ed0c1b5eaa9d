package dev.kpemu.kprobes;

import java.util.function.Consumer;

import dev.kpemu.kprobes.fail.FailSpec;
import dev.kpemu.kprobes.fail.FaultAttr;
import dev.kpemu.kprobes.fail.FunctionFailure;
import dev.kpemu.machine.Arch;

/** The package-private bare-metal {@link Guest} for the fail package's tests. */
public final class FailureGuests implements AutoCloseable {
    private final Guest guest;
    private final Kprobes kprobes;

    private FailureGuests(Arch arch) {
        this.guest = Guest.create(arch);
        this.kprobes = guest.kprobes();
    }

    public static FailureGuests create(Arch arch) { return new FailureGuests(arch); }

    public FunctionFailure arm(FailSpec spec, FunctionFailure.TaskView task, Consumer<FunctionFailure.Injection> onInjection) {
        return FunctionFailure.arm(kprobes, guest.symbols(), spec, FaultAttr.DEFAULT_SEED, task, onInjection);
    }

    public long call(String fn, long... args) { return guest.call(fn, args); }

    @Override public void close() {
        kprobes.close();
        guest.close();
    }
}
