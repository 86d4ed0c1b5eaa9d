package dev.kpemu.machine;

import static dev.kpemu.machine.SmpGuest.DATA;
import static dev.kpemu.machine.SmpGuest.FUNC;
import static dev.kpemu.machine.SmpGuest.RAM;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.ValueLayout;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.unicorn.Unicorn;

/**
 * Facts about Unicorn 2.1.4 for SMP (issue 26: one engine per virtual CPU, all mapping the same
 * guest RAM, run in turn on one host thread), both arches. Each test asserts what the engine does;
 * where that is wrong for SMP, it asserts the remedy too. docs/smp-notes.md says what follows.
 */
class SharedRamEnginesTest {

    /** (a) A guest store on engine A is read by guest code on engine B and by the host, in place and through B. */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void guestStoreOnOneEngineIsSeenByTheOtherAndTheHost(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn a = g.engine(ram); Unicorn b = g.engine(ram)) {
                long v = 0x1122_3344_5566_7788L;
                g.guestStore(a, DATA, v);
                assertEquals(v, ram.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, DATA - RAM), "host memory in place");
                assertEquals(v, b.memReadLong(DATA), "uc_mem_read on B");
                // guest code on B: the function's result register loaded from DATA (a one-load program)
                g.guestStore(b, DATA + 8, 0);   // B has run too
                assertEquals(v, loadOnEngine(g, b, DATA), "a guest load on B");
            }
        }
    }

    /** Guest code on {@code uc} loading 8 bytes at {@code address} (into the result register). */
    private static long loadOnEngine(SmpGuest g, Unicorn uc, long address) {
        String src = g == SmpGuest.X86 ? "mov (%r9), %rax\n nop" : "ldr x0, [x9]\n nop";
        byte[] code = g.asm(src, SmpGuest.SCRATCH);
        uc.memWrite(SmpGuest.SCRATCH, code);
        uc.regWrite(g.arg0(), address);
        uc.start(SmpGuest.SCRATCH, SmpGuest.SCRATCH + code.length - (g == SmpGuest.X86 ? 1 : 4), 0, 0);
        return uc.regRead(g.result());
    }

    /**
     * (b) Cross-modifying code: B has translated and run {@code FUNC}; A's guest store rewrites it.
     * A store only invalidates the translations of the engine that made it, so B runs the OLD code
     * again. Dropping B's translations of the range ({@code uc_ctl} TB_REMOVE_CACHE) or all of them
     * (TB_FLUSH) makes B run the new code.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void guestStoreOnOneEngineLeavesTheOtherEngineRunningOldCode(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn a = g.engine(ram); Unicorn b = g.engine(ram)) {
                assertEquals(1, g.callFunction(b));
                assertEquals(1, g.callFunction(a));
                g.guestStore(a, FUNC, g.functionWord(2));
                assertEquals(2, g.callFunction(a), "A's own store drops A's translation");
                assertEquals(1, g.callFunction(b), "B still runs its translation of the old bytes");
                assertEquals(1, g.callFunction(b), "...every time");
                b.removeTranslationCache(FUNC, FUNC + 8);
                assertEquals(2, g.callFunction(b), "after B's TB_REMOVE_CACHE of the range");

                // the same with the whole cache dropped
                g.guestStore(a, FUNC, g.functionWord(3));
                assertEquals(2, g.callFunction(b));
                b.flushTranslationCache();
                assertEquals(3, g.callFunction(b), "after B's TB_FLUSH");
            }
        }
    }

    /**
     * (b) TB_REMOVE_CACHE need not name a block's start: Unicorn translates the range's start
     * (virtual) to physical through the engine's current page tables and drops every block
     * overlapping the physical range. Here one byte inside the function's last instruction (the
     * {@code ret}, byte 5 on both arches) is enough.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void removingAnyByteOfABlockDropsIt(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn a = g.engine(ram); Unicorn b = g.engine(ram)) {
                assertEquals(1, g.callFunction(b));
                g.guestStore(a, FUNC, g.functionWord(2));
                b.removeTranslationCache(FUNC + 5, FUNC + 6);
                assertEquals(2, g.callFunction(b));
            }
        }
    }

    /**
     * (c) A host write through A's memory API ({@code uc_mem_write}), and a host store straight into
     * the shared host memory: does A, does B run the new code? Asserted as measured on 2.1.4, with
     * the remedy (TB_REMOVE_CACHE on each engine that ran the old code).
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void hostWritesThroughOneEngine(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn a = g.engine(ram); Unicorn b = g.engine(ram)) {
                assertEquals(1, g.callFunction(a));
                assertEquals(1, g.callFunction(b));
                a.memWrite(FUNC, g.functionBytes(2));
                assertEquals(HOST_WRITE_SEEN_BY_WRITER, g.callFunction(a), "A after uc_mem_write on A");
                assertEquals(1, g.callFunction(b), "B after uc_mem_write on A");
                a.removeTranslationCache(FUNC, FUNC + 8);
                b.removeTranslationCache(FUNC, FUNC + 8);
                assertEquals(2, g.callFunction(a));
                assertEquals(2, g.callFunction(b));

                // a host store in place: no engine is told
                SmpGuest.put(ram.segment(), FUNC, g.functionBytes(3));
                assertEquals(2, g.callFunction(a), "A after a store in host memory");
                assertEquals(2, g.callFunction(b), "B after a store in host memory");
                a.removeTranslationCache(FUNC, FUNC + 8);
                b.removeTranslationCache(FUNC, FUNC + 8);
                assertEquals(3, g.callFunction(a));
                assertEquals(3, g.callFunction(b));
            }
        }
    }

    /** What A runs after its own uc_mem_write of code A has translated (measured, see the notes). */
    static final long HOST_WRITE_SEEN_BY_WRITER = 1;
}
