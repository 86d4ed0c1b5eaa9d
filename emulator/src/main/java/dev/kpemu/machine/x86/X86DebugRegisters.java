package dev.kpemu.machine.x86;

import dev.kpemu.machine.GuestDebugRegisters;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.Watchpoints;
import dev.kpemu.unicorn.X86Reg;

/**
 * x86-64's DR0–DR3 and DR7 on {@link Watchpoints} ({@link GuestDebugRegisters}). A slot is
 * enabled by its L or G bit in DR7; its R/W field 01 watches writes, 11 reads and writes (00,
 * instruction breakpoints, and 10, I/O, are not emulated); its LEN field gives 1, 2, 8 or 4 bytes
 * at DRn with the low bits cleared, as the hardware aligns it. The linear address is translated
 * through the page tables current when DR7 or DRn is written (Linux writes a task's slots when it
 * schedules the task in and clears them when it schedules it out, so a user address is the
 * running task's); a slot whose address is not mapped then, or not in RAM, stays unarmed.
 * A hit of a slot on its own vCPU makes a #DB pending there with DR6's B bit of the slot; the
 * run loop delivers it at the end of the accessing translated block ({@link X86Machine#beforeSlice}),
 * so the instructions of that block after the access have run (the hardware traps right after
 * the accessing instruction). DR6 is written into the engine before the delivery: the guest's
 * {@code mov %db6,%reg} reads the engine's stored value.
 */
public final class X86DebugRegisters implements GuestDebugRegisters {
    /** DR6's bits that read as 1 (reserved, and the active-low RTM/BLD bits inactive). */
    public static final long DR6_RESERVED_ONES = 0xffff_0ff0L;
    private static final int SLOTS = 4;
    private static final int[] DR = {X86Reg.DR0, X86Reg.DR1, X86Reg.DR2, X86Reg.DR3};
    /** Bytes watched for each value of a slot's LEN field. */
    private static final int[] LENGTH = {1, 2, 8, 4};
    private static final int RW_WRITE = 1, RW_READ_WRITE = 3;

    /** One armed slot: what it watches and its watch. */
    private record Armed(long linear, int length, int rw, long physical, Watchpoints.Watch watch) {}

    private final Machine machine;
    private final Armed[][] armed = new Armed[Machine.MAX_CPUS][SLOTS];
    /** Per vCPU, DR6's B bits of the hits not delivered yet. */
    private final int[] pending = new int[Machine.MAX_CPUS];
    private long delivered;
    private static final boolean TRACE = Boolean.getBoolean("kpemu.trace.debugregs");

    X86DebugRegisters(Machine machine) {
        this.machine = machine;
    }

    @Override
    public void sync() {
        int cpu = machine.cpu();
        var uc = machine.engine();
        long dr7 = uc.regRead(X86Reg.DR7);
        if (TRACE) System.err.printf("[dr sync cpu %d pc 0x%x dr7 0x%x dr0 0x%x cr3 0x%x]%n", cpu, machine.pc(), dr7, uc.regRead(X86Reg.DR0), uc.regRead(X86Reg.CR3));
        for (int slot = 0; slot < SLOTS; slot++) {
            Armed want = wanted(slot, dr7, uc.regRead(DR[slot]));
            Armed now = armed[cpu][slot];
            if (now != null && want != null && now.linear == want.linear && now.length == want.length
                    && now.rw == want.rw && now.physical == want.physical) continue;
            if (now != null) machine.watchpoints().remove(now.watch);
            armed[cpu][slot] = want == null ? null : arm(cpu, slot, want);
        }
    }

    /** The slot as DR7 and DRn describe it, translated now; null when off, not emulated or unmapped. */
    private Armed wanted(int slot, long dr7, long address) {
        if (((dr7 >>> (2 * slot)) & 3) == 0) return null;
        int rw = (int) ((dr7 >>> (16 + 4 * slot)) & 3);
        if (rw != RW_WRITE && rw != RW_READ_WRITE) return null;
        int length = LENGTH[(int) ((dr7 >>> (18 + 4 * slot)) & 3)];
        long linear = address & ~(long) (length - 1);
        PageTableWalker.Translation t = machine.pageTables().translate(linear);
        if (t == null || !machine.memory().isRam(t.physical())) return null;
        return new Armed(linear, length, rw, t.physical(), null);
    }

    private Armed arm(int cpu, int slot, Armed a) {
        int bit = 1 << slot;
        Watchpoints.Watch w = machine.watchpoints().add(a.physical, a.length, a.rw == RW_READ_WRITE, true, true, hit -> {
            if (hit.cpu() != cpu) return;      // another vCPU's access: its own DR7 decides
            pending[cpu] |= bit;
            if (TRACE) System.err.printf("[dr hit cpu %d pc 0x%x pa 0x%x new 0x%x]%n", cpu, hit.pc(), hit.physicalAddress(), hit.newValue());
            machine.endSliceSoon();
        });
        return new Armed(a.linear, a.length, a.rw, a.physical, w);
    }

    /** Takes the current vCPU's pending B bits (0: no #DB to deliver). */
    int takePending(int cpu) {
        int p = pending[cpu];
        if (p != 0) {
            pending[cpu] = 0;
            delivered++;
        }
        return p;
    }

    @Override
    public int armedSlots() {
        int n = 0;
        for (Armed[] perCpu : armed) for (Armed a : perCpu) if (a != null) n++;
        return n;
    }

    @Override
    public long exceptionsDelivered() { return delivered; }
}
