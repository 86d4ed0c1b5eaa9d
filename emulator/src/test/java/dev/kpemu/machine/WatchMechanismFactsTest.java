package dev.kpemu.machine;

import static dev.kpemu.machine.SmpGuest.DATA;
import static dev.kpemu.machine.SmpGuest.RAM;
import static dev.kpemu.machine.SmpGuest.RAM_SIZE;
import static dev.kpemu.machine.SmpGuest.SCRATCH;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * What Unicorn 2.1.4 offers for data watchpoints, measured on both arches (bare engines over one
 * {@link HostRam} region, paging off): the facts {@link Watchpoints} is built on and the ones that
 * ruled the other mechanisms out. docs/watchpoint-notes.md says what follows from each.
 */
class WatchMechanismFactsTest {
    static final long V = 0x8877_6655_4433_2211L;

    /** Runs {@code src} (then a nop, the run's end) at SCRATCH with the first argument register = {@code address}, the second = {@link #V}. */
    static void run(SmpGuest g, Unicorn uc, String src, long address) {
        byte[] code = g.asm(src + "\n" + g.nop(), SCRATCH);
        uc.memWrite(SCRATCH, code);
        uc.regWrite(g.arg0(), address);
        uc.regWrite(g.arg1(), V);
        uc.start(SCRATCH, SCRATCH + code.length - (g == SmpGuest.X86 ? 1 : 4), 0, 0);
    }

    static String load(SmpGuest g, int off) { return g == SmpGuest.X86 ? "mov " + off + "(%r9), %rax" : "ldr x0, [x9, #" + off + "]"; }

    static long hostLong(HostRam ram, long pa) { return ram.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, pa - RAM); }

    /**
     * A page without READ permission (on a {@code uc_mem_map_ptr} region, which {@code uc_mem_protect}
     * splits keeping the host memory) reports only the first load: it fills the TLB, and later loads
     * take the fast path, which checks no permission. Reads cannot be watched this way.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void aPageWithoutReadPermissionReportsOnlyTheFirstLoad(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            uc.memProtect(DATA, 0x1000, Unicorn.PROT_EXEC);
            List<Long> reads = new ArrayList<>();
            uc.hookMemoryEvent(Unicorn.HOOK_MEM_READ_PROT, DATA, DATA + 0xfff, (u, type, pa, size, value) -> reads.add(pa));
            run(g, uc, load(g, 0) + "\n" + load(g, 8) + "\n" + load(g, 0), DATA);
            assertEquals(List.of(DATA), reads);
        }
    }

    /**
     * A store to a page without WRITE permission calls the WRITE_PROT hook with the physical address,
     * size, value and the pc synced to the store; a hook that returns true has the store discarded
     * (the engine treats the page as ROM), so whoever watches must perform it.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void aHandledStoreToAReadOnlyPageIsDiscarded(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            uc.memProtect(DATA, 0x1000, Unicorn.PROT_READ | Unicorn.PROT_EXEC);
            List<String> writes = new ArrayList<>();
            uc.hookMemoryEvent(Unicorn.HOOK_MEM_WRITE_PROT, DATA, DATA + 0xfff, (u, type, pa, size, value) ->
                    writes.add(String.format("%x %x %d %x", u.regRead(g.pc()) - SCRATCH, pa, size, value)));
            run(g, uc, g.nop() + "\n" + g.store(), DATA + 8);
            int nop = g.asm(g.nop(), SCRATCH).length;
            assertEquals(List.of(String.format("%x %x 8 %x", nop, DATA + 8, V)), writes);
            assertEquals(0, hostLong(ram, DATA + 8), "discarded");
        }
    }

    /**
     * In the WRITE_PROT hook every register holds the value the instructions before the store gave
     * it, also those computed earlier in the same translated block (TCG writes its globals back
     * before an access that can fault): a watchpoint's fetchargs may read registers there.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void registersAreCurrentInTheWriteProtectHook(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            uc.memProtect(DATA, 0x1000, Unicorn.PROT_READ | Unicorn.PROT_EXEC);
            int reg = g == SmpGuest.X86 ? X86Reg.RBX : Arm64Reg.X3;
            List<Long> seen = new ArrayList<>();
            uc.hookMemoryEvent(Unicorn.HOOK_MEM_WRITE_PROT, DATA, DATA + 0xfff, (u, type, pa, size, value) -> seen.add(u.regRead(reg)));
            String before = g == SmpGuest.X86 ? "mov $5, %rbx\n add $1, %rbx\n" : "mov x3, #5\n add x3, x3, #1\n";
            run(g, uc, before + g.store(), DATA);
            assertEquals(List.of(6L), seen);
        }
    }

    /**
     * Stopping the engine inside the WRITE_PROT hook without performing the store is a precise
     * stop <em>before</em> the access: the run ends with the pc at the storing instruction and
     * nothing of it committed (x86 {@code push}: RSP not lowered; arm64 post-indexed {@code str}:
     * the base register not advanced; the memory untouched; the instructions before it done).
     * Running again from that pc executes the instruction again: the hook sees the same store
     * once more, and when it performs it this time, the program ends as if never stopped. The
     * route to hardware-like watchpoint stops (arm64 before the access; x86 after it, one step later).
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void stoppingInTheWriteProtectHookStopsBeforeTheStore(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            uc.memProtect(DATA, 0x1000, Unicorn.PROT_READ | Unicorn.PROT_EXEC);
            int counter = g == SmpGuest.X86 ? X86Reg.RBX : Arm64Reg.X3;
            int base = g == SmpGuest.X86 ? X86Reg.RSP : Arm64Reg.X9;
            List<Long> storePcs = new ArrayList<>();
            boolean[] stopped = {false};
            uc.hookMemoryEvent(Unicorn.HOOK_MEM_WRITE_PROT, DATA, DATA + 0xfff, (u, type, pa, size, value) -> {
                storePcs.add(u.regRead(g.pc()) - SCRATCH);
                if (!stopped[0]) {
                    stopped[0] = true;
                    u.stop();
                } else {
                    ram.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, pa - RAM, value);
                }
                return true;
            });
            // the stored-to word is DATA + 0xf8 on both: x86 pushes below RSP = DATA + 0x100, arm64 stores at X9 = DATA + 0xf8
            String src = g == SmpGuest.X86 ? "mov $1, %rbx\n add $1, %rbx\n push %r10\n add $1, %rbx"
                    : "mov x3, #1\n add x3, x3, #1\n str x10, [x9], #8\n add x3, x3, #1";
            int before = g.asm(g == SmpGuest.X86 ? "mov $1, %rbx\n add $1, %rbx" : "mov x3, #1\n add x3, x3, #1", SCRATCH).length;
            byte[] code = g.asm(src + "\n" + g.nop(), SCRATCH);
            uc.memWrite(SCRATCH, code);
            uc.regWrite(base, g == SmpGuest.X86 ? DATA + 0x100 : DATA + 0xf8);
            uc.regWrite(g.arg1(), V);
            long end = SCRATCH + code.length - (g == SmpGuest.X86 ? 1 : 4);
            uc.start(SCRATCH, end, 0, 0);
            assertEquals(SCRATCH + before, uc.regRead(g.pc()), "stopped at the store");
            assertEquals(2, uc.regRead(counter), "the instructions before it done, none after");
            assertEquals(g == SmpGuest.X86 ? DATA + 0x100 : DATA + 0xf8, uc.regRead(base), "the store's own register update not done");
            assertEquals(0, hostLong(ram, DATA + 0xf8), "nothing stored");
            uc.start(uc.regRead(g.pc()), end, 0, 0);
            assertEquals(List.of((long) before, (long) before), storePcs, "the store seen twice: stopped, then performed");
            assertEquals(3, uc.regRead(counter));
            assertEquals(g == SmpGuest.X86 ? DATA + 0xf8 : DATA + 0x100, uc.regRead(base));
            assertEquals(V, hostLong(ram, DATA + 0xf8));
        }
    }

    /**
     * The MMIO route for reads (an MMIO window over a RAM page, its callbacks doing the access on
     * host memory): every load reaches the read callback, an 8-byte one as two 4-byte calls, but the
     * pc read there is not the loading instruction's — the engine syncs it only for memory hooks,
     * not for I/O (here it holds the block's first instruction). A reported pc, size and value
     * would need the instruction found and the halves joined some other way.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void anMmioPageSeesEveryLoadButNotItsPc(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.open()) {
            java.lang.foreign.MemorySegment all = ram.segment();
            uc.memMapPtr(RAM, DATA - RAM, Unicorn.PROT_ALL, all.asSlice(0, DATA - RAM));
            uc.memMapPtr(DATA + 0x1000, RAM + RAM_SIZE - DATA - 0x1000, Unicorn.PROT_ALL, all.asSlice(DATA + 0x1000 - RAM));
            List<String> reads = new ArrayList<>();
            uc.mmioMap(DATA, 0x1000, (offset, size) -> {
                reads.add(Long.toHexString(offset) + "@" + Long.toHexString(uc.regRead(g.pc()) - SCRATCH));
                return all.get(ValueLayout.JAVA_LONG_UNALIGNED, DATA - RAM + offset);
            }, (offset, size, value) -> { });
            all.set(ValueLayout.JAVA_LONG_UNALIGNED, DATA - RAM + 8, V);
            String src = g.nop() + "\n" + g.nop() + "\n" + load(g, 8) + "\n" + load(g, 0);
            run(g, uc, src, DATA);
            // an 8-byte load arrives as two 4-byte calls; the pc is the block's first instruction in each
            assertEquals(List.of("8@0", "c@0", "0@0", "4@0"), reads);
        }
    }

    /**
     * A {@code UC_HOOK_MEM_WRITE} hook bounded to a page misses a store that starts 4 bytes below it:
     * the hook is checked against the access's first byte, and the engine's byte-by-byte completion
     * of a page-crossing store runs with memory hooks off. Hence {@link Watchpoints#CROSSING_REACH}.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void aBoundedWriteHookMissesAStoreCrossingIntoItsRange(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            List<Long> writes = new ArrayList<>();
            uc.hookMemory(Unicorn.HOOK_MEM_WRITE, DATA, DATA + 0xfff, (u, type, pa, size, value) -> writes.add(pa));
            run(g, uc, g.store(), DATA - 4);
            assertEquals(List.of(), writes);
            assertEquals(V, hostLong(ram, DATA - 4), "the store happened, across the page boundary");
        }
    }

    /**
     * The guest's own debug registers do nothing under Unicorn 2.1.4 (QEMU's watchpoint insertion is
     * compiled out): x86 DR0 = the address with DR7 enabling a write watch of 8 bytes (L0, R/W0 = 01,
     * LEN0 = 10), arm64 DBGWVR0_EL1/DBGWCR0_EL1 a store watch of 8 bytes at EL1 with MDSCR_EL1.MDE
     * and PSTATE.D clear: the store completes and no debug exception reaches the interrupt hook.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void theGuestsOwnDataWatchpointsDoNotFire(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(RAM_SIZE); Unicorn uc = g.engine(ram)) {
            List<Integer> exceptions = new ArrayList<>();
            uc.hookInterrupt((u, intno) -> {
                exceptions.add(intno);
                u.stop();
            });
            if (g == SmpGuest.X86) {
                uc.regWrite(X86Reg.DR0, DATA);
                uc.regWrite(X86Reg.DR7, 1L | (1L << 16) | (2L << 18));
                assertEquals(DATA, uc.regRead(X86Reg.DR0));
            } else {
                uc.sysRegWrite(2, 0, 0, 0, 6, DATA);                                   // DBGWVR0_EL1
                uc.sysRegWrite(2, 0, 0, 0, 7, 1L | (1L << 1) | (2L << 3) | (0xffL << 5));  // DBGWCR0_EL1: E, EL1, store, 8 bytes
                uc.sysRegWrite(2, 0, 0, 2, 2, 1L << 15);                               // MDSCR_EL1.MDE
                uc.regWrite(Arm64Reg.PSTATE, uc.regRead(Arm64Reg.PSTATE) & ~(1L << 9));  // PSTATE.D clear
                assertEquals(DATA, uc.sysRegRead(2, 0, 0, 0, 6));
            }
            run(g, uc, g.store(), DATA);
            assertEquals(List.of(), exceptions);
            assertEquals(V, hostLong(ram, DATA));
        }
    }
}
