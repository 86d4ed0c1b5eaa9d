package dev.kpemu.machine.arm64;

import dev.kpemu.machine.GuestDebugRegisters;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.WatchHit;
import dev.kpemu.machine.Watchpoints;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * arm64's watchpoint registers DBGWVRn_EL1/DBGWCRn_EL1 on {@link Watchpoints}
 * ({@link GuestDebugRegisters}); Unicorn 2.1.4 stores them but never fires them. The host calls
 * {@link #sync} after each guest {@code msr} of them (host breakpoints after those
 * instructions of the kernel's text, {@code boot.Arm64DebugRegisterWrites}: Unicorn allows one
 * MSR hook per engine, and the generic timer has it), which re-reads the current vCPU's registers
 * from its engine: a slot whose control has E set, LSC with the store bit (10 or 11), BAS a
 * contiguous run of bytes and MASK 0 becomes a write watch of BAS's bytes at DBGWVRn (8-byte
 * aligned), translated through the page tables current then (Linux writes a task's slots when
 * perf schedules it in). Loads (LSC 01, and the load half of 11), address masks and breakpoints
 * (DBGBVR/DBGBCR) are not emulated.
 *
 * <p>A store the slot's vCPU makes to it, from an EL the slot's PAC field names, with MDSCR_EL1.MDE
 * set (and KDE set and PSTATE.D clear for EL1), is stopped <em>before</em> it is made
 * ({@link Watchpoints#trapBefore}): the engine ends its run with the pc at the storing
 * instruction, and the machine takes the watchpoint exception there before any interrupt
 * ({@link Arm64Machine#beforeSlice}): ESR_EL1 EC 0x34 (from EL0) or 0x35 (from EL1), WnR, DFSC
 * 0x22; FAR_EL1 the accessed address; ELR_EL1 the storing instruction. Linux's watchpoint handler
 * then runs as on hardware (ptrace's tracer, or Linux's own single-step, gets the store past the
 * slot). kpemu's own watches on the same bytes are told of the store when it is made, not of the
 * trapped attempt ({@link Watchpoints#addTrapping}).
 */
public final class Arm64DebugRegisters implements GuestDebugRegisters {
    /** Watchpoint slots emulated (the Cortex-A57 has 4: ID_AA64DFR0_EL1.WRPs = 3). */
    static final int SLOTS = 4;
    /** DBGWVRn_EL1 / DBGWCRn_EL1 are op0 2, op1 0, CRn 0, CRm n, op2 6 / 7; MDSCR_EL1 CRm 2, op2 2. */
    public static final int OP2_WVR = 6, OP2_WCR = 7, CRM_MDSCR = 2, OP2_MDSCR = 2;
    private static final long MDSCR_KDE = 1L << 13, MDSCR_MDE = 1L << 15;
    static final int EC_WATCHPOINT_LOWER = 0x34, EC_WATCHPOINT_CURRENT = 0x35;
    private static final long ESR_IL = 1L << 25, ESR_WNR = 1L << 6, DFSC_DEBUG = 0x22;
    private static final boolean TRACE = Boolean.getBoolean("kpemu.trace.debugregs");

    private record Armed(long address, int length, int pac, long physical, Watchpoints.Watch watch) {}

    /** A watchpoint exception to take before the next slice. */
    record Pending(long esr, long far) {}

    private final Arm64Machine machine;
    private final Armed[][] armed = new Armed[Machine.MAX_CPUS][SLOTS];
    private final Pending[] pending = new Pending[Machine.MAX_CPUS];
    private long delivered;

    Arm64DebugRegisters(Arm64Machine machine) {
        this.machine = machine;
    }

    @Override
    public void sync() {
        int cpu = machine.cpu();
        Unicorn uc = machine.engine();
        if (TRACE) System.err.printf("[dbgw sync cpu %d pc 0x%x]%n", cpu, machine.pc());
        for (int slot = 0; slot < SLOTS; slot++) {
            long wvr = uc.sysRegRead(2, 0, 0, slot, OP2_WVR), wcr = uc.sysRegRead(2, 0, 0, slot, OP2_WCR);
            Armed want = wanted(wvr, wcr);
            Armed now = armed[cpu][slot];
            if (now != null && want != null && now.address == want.address && now.length == want.length
                    && now.pac == want.pac && now.physical == want.physical) continue;
            if (now != null) machine.watchpoints().remove(now.watch);
            armed[cpu][slot] = want == null ? null : arm(cpu, want);
            if (TRACE && (now != null || want != null)) System.err.printf("[dbgw cpu %d slot %d wvr 0x%x wcr 0x%x -> %s]%n", cpu, slot, wvr, wcr, armed[cpu][slot]);
        }
    }

    /** The slot as DBGWVR/DBGWCR describe it, translated now; null when off, not emulated or unmapped. */
    private Armed wanted(long value, long control) {
        if ((control & 1) == 0) return null;
        int lsc = (int) (control >>> 3) & 3;
        if ((lsc & 2) == 0) return null;                 // loads only: not emulated
        if (((control >>> 24) & 0x1f) != 0) return null; // an address mask: not emulated
        int bas = (int) (control >>> 5) & 0xff;
        if (bas == 0) return null;
        int first = Integer.numberOfTrailingZeros(bas);
        int length = Integer.bitCount(bas);
        if ((bas >>> first) != (1 << length) - 1) return null;   // not contiguous
        long address = (value & ~7L) + first;
        PageTableWalker.Translation t = machine.pageTables().translate(address);
        if (t == null || !machine.memory().isRam(t.physical())) return null;
        return new Armed(address, length, (int) (control >>> 1) & 3, t.physical(), null);
    }

    private Armed arm(int cpu, Armed a) {
        Watchpoints.Watch w = machine.watchpoints().addTrapping(a.physical, a.length, hit -> onHit(cpu, a, hit));
        return new Armed(a.address, a.length, a.pac, a.physical, w);
    }

    private void onHit(int cpu, Armed a, WatchHit hit) {
        if (hit.cpu() != cpu || !hit.write() || pending[cpu] != null) return;
        long pstate = machine.engine().regRead(Arm64Reg.PSTATE);
        int el = (int) (pstate >>> 2) & 3;
        if (el == 0 ? (a.pac & 2) == 0 : (a.pac & 1) == 0) return;
        long m = machine.engine().sysRegRead(2, 0, 0, CRM_MDSCR, OP2_MDSCR);     // MDSCR_EL1, as the guest left it
        if ((m & MDSCR_MDE) == 0) return;
        if (el == 1 && ((m & MDSCR_KDE) == 0 || (pstate & Arm64Machine.PSTATE_D) != 0)) return;
        long esr = ((long) (el == 0 ? EC_WATCHPOINT_LOWER : EC_WATCHPOINT_CURRENT) << 26) | ESR_IL | ESR_WNR | DFSC_DEBUG;
        long far = a.address + (hit.physicalAddress() - a.physical);
        pending[cpu] = new Pending(esr, far);
        if (TRACE) System.err.printf("[dbgw hit cpu %d el %d pc 0x%x far 0x%x]%n", cpu, el, hit.pc(), far);
        machine.watchpoints().trapBefore(hit);
    }

    /** Takes the current vCPU's pending watchpoint exception (null: none). */
    Pending takePending(int cpu) {
        Pending p = pending[cpu];
        if (p != null) {
            pending[cpu] = null;
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
