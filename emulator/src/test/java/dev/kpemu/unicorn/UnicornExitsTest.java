package dev.kpemu.unicorn;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What Unicorn 2.1.4's exits list (UC_CTL_UC_EXITS) does for a stop in the middle of a block, the
 * candidate for uprobes at offsets that are not block starts (docs/uprobe-notes.md): a straight
 * block of eight increments, an exit on the fourth. Measured on a bare engine, both arches: the
 * engine stops before the exit's instruction, nothing written to memory; a run that starts at an
 * exit runs nothing (a host resumes by taking the exit out); a block translated before its exit
 * was written stops too (Unicorn drops the translation at the exit's address when the list is
 * written: through the current page tables, so with guest paging and an address the current
 * process does not map, the host must drop the blocks itself, as {@code InstructionClock.addBreak}
 * does).
 */
class UnicornExitsTest {
    static final long BASE = 0x10000;
    static final int N = 8;

    /** A block of N increments of the counter register (x86-64 {@code inc %rax}, arm64 {@code add x0, x0, #1}). */
    record Code(Unicorn uc, int insnSize, int counter, int pcReg) implements AutoCloseable {
        static Code open(boolean arm64) {
            Unicorn uc = arm64 ? Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM) : Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64);
            byte[] one = arm64 ? new byte[] {0x00, 0x04, 0x00, (byte) 0x91} : new byte[] {0x48, (byte) 0xff, (byte) 0xc0};
            byte[] code = new byte[one.length * N];
            for (int i = 0; i < N; i++) System.arraycopy(one, 0, code, i * one.length, one.length);
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            uc.useExits(true);
            return new Code(uc, one.length, arm64 ? Arm64Reg.X0 : X86Reg.RAX, arm64 ? Arm64Reg.PC : X86Reg.RIP);
        }

        long at(int i) { return BASE + (long) i * insnSize; }

        /** Runs from instruction {@code from} with the exits {@code exits} (the end always one); the counter after. */
        long run(int from, long... exits) {
            uc.regWrite(counter, from);
            long[] all = java.util.Arrays.copyOf(exits, exits.length + 1);
            all[exits.length] = at(N);
            uc.setExits(all);
            uc.start(at(from), 0, 0, 0);   // until is ignored in exits mode
            return uc.regRead(counter);
        }

        long pc() { return uc.regRead(pcReg); }

        @Override public void close() { uc.close(); }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void anExitStopsInTheMiddleOfABlockWithNothingWritten(boolean arm64) {
        try (Code c = Code.open(arm64)) {
            assertEquals(3, c.run(0, c.at(3)), "the three instructions before the exit ran");
            assertEquals(c.at(3), c.pc(), "stopped at the exit");
            // resuming at the exit with the exit still listed: nothing runs (a new block starting
            // at an exit ends before its first instruction)
            assertEquals(3, c.run(3, c.at(3)));
            assertEquals(c.at(3), c.pc());
            // the exit taken out: the rest runs
            assertEquals(N, c.run(3));
            assertEquals(c.at(N), c.pc());
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aBlockTranslatedBeforeItsExitWasAddedStopsToo(boolean arm64) {
        try (Code c = Code.open(arm64)) {
            assertEquals(N, c.run(0), "translated whole");
            assertEquals(N, c.run(0), "and run again from the cache");
            long cached = c.run(0, c.at(3));
            System.out.printf("%s: a block translated before its exit was added ran %d of %d%n", arm64 ? "arm64" : "x86_64", cached, N);
            assertEquals(3, cached, "Unicorn drops the block when the exit is written (in a flat address space)");
            assertEquals(N, c.run(3));
            c.uc().flushTranslationCache();
            assertEquals(3, c.run(0, c.at(3)), "after a flush too");
        }
    }

    /**
     * The exits are a set looked up per translated instruction: a thousand exits the code never
     * reaches leave the result alone (the cost is printed, not asserted: translation only).
     */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aThousandUnreachedExitsChangeNothing(boolean arm64) {
        try (Code c = Code.open(arm64)) {
            long[] far = new long[1000];
            for (int i = 0; i < far.length; i++) far[i] = 0x40_0000L + 16L * i;
            long[] ns = new long[4];
            for (int round = 0; round < 2; round++) {
                c.run(0);
                long t0 = System.nanoTime();
                for (int i = 0; i < 2000; i++) { c.uc().flushTranslationCache(); c.uc().regWrite(c.counter(), 0); c.uc().start(BASE, 0, 0, 0); }
                long t1 = System.nanoTime();
                for (int i = 0; i < 2000; i++) { c.uc().regWrite(c.counter(), 0); c.uc().start(BASE, 0, 0, 0); }
                long t2 = System.nanoTime();
                ns[2 * round] = t1 - t0;
                ns[2 * round + 1] = t2 - t1;
                assertEquals(N, c.uc().regRead(c.counter()));
                c.run(0, far);
            }
            System.out.printf("%s: per run, translated each time / cached: 1 exit %.1f / %.1f us, 1001 exits %.1f / %.1f us%n",
                    arm64 ? "arm64" : "x86_64", ns[0] / 2000e3, ns[1] / 2000e3, ns[2] / 2000e3, ns[3] / 2000e3);
        }
    }
}
