package dev.kpemu.optprobes;

import dev.kpemu.machine.Machine;

/**
 * What jump optimization asks of every vCPU, not only the current one: Linux writes a jump only
 * when no CPU (and no interrupted context on any CPU) can be inside the displaced instructions
 * ({@code optimize_kprobe}'s {@code synchronize_rcu_tasks} and text_poke's {@code
 * text_poke_sync} across CPUs). A vCPU that was never started or was stopped ({@link
 * Machine.CpuState#STOPPED}) holds no context and is skipped; a halted one resumes where it halted
 * and counts. With one vCPU these are the current vCPU's pc and mode, as before.
 */
final class Vcpus {
    private Vcpus() {}

    /** One vCPU's pc and whether it runs user code. */
    interface Test {
        boolean holds(long pc, boolean userMode);
    }

    /** The pcs of every vCPU that holds a context (the current one's through {@link Machine#pc()}). */
    static long[] pcs(Machine machine, ArchOptimizer arch) {
        int n = machine.cpuCount();
        if (n == 1) return new long[] {machine.pc()};
        long[] out = new long[n];
        int k = 0;
        for (int c = 0; c < n; c++) {
            if (machine.cpuState(c) == Machine.CpuState.STOPPED) continue;
            out[k++] = c == machine.cpu() ? machine.pc() : arch.pc(machine.engine(c));
        }
        return java.util.Arrays.copyOf(out, k);
    }

    /** True when {@code test} holds for every vCPU that holds a context. */
    static boolean every(Machine machine, ArchOptimizer arch, Test test) {
        int n = machine.cpuCount();
        if (n == 1) return test.holds(machine.pc(), arch.inUserMode(machine));
        for (int c = 0; c < n; c++) {
            if (machine.cpuState(c) == Machine.CpuState.STOPPED) continue;
            boolean ok = c == machine.cpu()
                    ? test.holds(machine.pc(), arch.inUserMode(machine))
                    : test.holds(arch.pc(machine.engine(c)), arch.inUserMode(machine.engine(c)));
            if (!ok) return false;
        }
        return true;
    }
}
