package dev.kpemu.kprobes;

import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Unicorn;

/**
 * Bare-metal test fixture: calls a guest function from inside a kprobe handler, as a kernel
 * handler calls a kernel function (Linux's KUnit {@code test_kprobe_missed} calls the probed
 * function again from its handlers), and returns its return value. Probes hit during the call
 * count as missed.
 *
 * <p>It runs a nested, instruction-count-limited {@code uc_emu_start} on the engine that is
 * already running the handler, which docs/ARCHITECTURE.md's stopping rule forbids for booted
 * kernels; the bare-metal test guests never mix it with an uncounted run, so it lives here, in
 * the tests, and not in the engine.
 */
public final class GuestFunctionCall {
    /** Instructions a call may take before it counts as not returning. */
    private static final long CALL_BUDGET = 100_000_000L;

    private final Machine machine;
    private final Regs regs;
    /** Where every call returns to: a slot of the engine's area that is never executed. */
    private final long returnStop;

    private GuestFunctionCall(Kprobes kprobes) {
        this.machine = kprobes.machine();
        this.regs = kprobes.regs();
        this.returnStop = kprobes.allocateHostData(new byte[16]);
    }

    /** A caller for {@code kprobes}' machine; it takes one slot of the engine's area for its return stop. */
    public static GuestFunctionCall on(Kprobes kprobes) { return new GuestFunctionCall(kprobes); }

    /** Calls the guest function at {@code function} with register arguments; the registers are restored afterwards. */
    public long call(long function, long... args) {
        int registerArgs = switch (machine.arch()) {
            case X86_64 -> 6;
            case ARM64 -> 8;
        };
        if (args.length > registerArgs) throw new IllegalArgumentException("at most " + registerArgs + " register arguments");
        Unicorn uc = machine.engine();
        try (Unicorn.Context saved = uc.contextAlloc()) {
            uc.contextSave(saved);
            try {
                for (int i = 0; i < args.length; i++) regs.setArg(i, args[i]);
                long sp = (regs.sp() - 256) & ~0xfL;
                switch (machine.arch()) {
                    case X86_64 -> {
                        sp -= 8; // the call's return address
                        machine.writeVirtualLong(sp, returnStop);
                    }
                    case ARM64 -> regs.set("lr", returnStop);
                }
                regs.setSp(sp);
                uc.start(function, returnStop, 0, CALL_BUDGET);
                if (regs.ip() != returnStop) throw new IllegalStateException(String.format("guest call to 0x%x did not return (ip 0x%x)", function, regs.ip()));
                return regs.returnValue();
            } finally {
                uc.contextRestore(saved);
            }
        }
    }
}
