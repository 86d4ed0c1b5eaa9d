package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * {@link InstructionClock#keepStringStoresWritable}: a {@code rep stosb} into a range the host
 * named has its pages marked dirty in Unicorn's TLB after a few iterations, and the guest sees
 * nothing of it: the same bytes stored, the same instruction count, as without. Unicorn's flat
 * x86-64 mode (paging off) maps all memory readable, writable and executable, the same case as
 * Linux's image before {@code mark_rodata_ro}: without the mark every store of the loop takes
 * Unicorn's store slow path.
 */
class StringStoresWritableTest {
    private static final long CODE = 0x10000, DATA = 0x20000, DATA_SIZE = 0x8000, OTHER = 0x30000;
    private static final String FILL = "mov $%d, %%rdi\n mov $%d, %%rcx\n mov $0x5a, %%al\n rep stosb\n nop\n hlt";

    /** One run of the fill program at {@code dst} for {@code count} bytes; what it leaves and counts. */
    private record Run(byte[] memory, long executed, long marked) {}

    private static Run fill(long dst, long count, long lo, long hi) {
        return fill(dst, count, lo, hi, 1);
    }

    /** As above, the program run {@code times} times in the same engine (one slice each). */
    private static Run fill(long dst, long count, long lo, long hi, int times) {
        byte[] code = Asm.x86(String.format(FILL, dst, count), CODE);
        long end = CODE + code.length - 2;   // the nop's address: the run stops before it
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64, Unicorn.CPU_X86_QEMU64);
             InstructionClock clock = new InstructionClock(uc, false)) {
            uc.memMap(CODE, 0x30000, Unicorn.PROT_ALL);
            uc.memWrite(CODE, code);
            if (hi != 0) assertTrue(clock.keepStringStoresWritable(lo, hi), "the natives can mark string stores");
            for (int i = 0; i < times; i++) {
                clock.arm(1L << 40);
                uc.start(CODE, end, 0, 0);
                assertEquals(end, uc.regRead(X86Reg.RIP), "the program ran to its end");
                assertEquals(0, uc.regRead(X86Reg.RCX), "rep stosb ran every iteration");
            }
            return new Run(uc.memRead(DATA, (int) (OTHER + 0x1000 - DATA)), clock.executed(), clock.stringStorePagesMarked());
        }
    }

    @Test void repStosIntoTheRangeMarksItsPagesAndChangesNothingTheGuestSees() {
        Run plain = fill(DATA, DATA_SIZE, 0, 0);
        Run marked = fill(DATA, DATA_SIZE, DATA, DATA + DATA_SIZE);
        assertEquals(DATA_SIZE / 4096, marked.marked(), "pages marked");
        assertEquals(0, plain.marked());
        assertArrayEquals(plain.memory(), marked.memory(), "the same bytes stored");
        byte[] expected = new byte[plain.memory().length];
        Arrays.fill(expected, 0, (int) DATA_SIZE, (byte) 0x5a);
        assertArrayEquals(expected, plain.memory(), "the fill stored 0x5a over the range and nothing else");
        assertEquals(plain.executed(), marked.executed(), "the same instruction count");
        assertEquals(4 + DATA_SIZE, plain.executed(), "three moves with the first iteration in one block, one count per later iteration, and the rep block's last run at RCX = 0 (QEMU's rep loop)");
    }

    @Test void theMarkingEndsOnceTheRangeHasBeenStoredOver() {
        // 8 pages: the first fill marks each of them, and the feature turns itself off; the
        // second fill of the same range, in a new slice, marks none again
        Run once = fill(DATA, DATA_SIZE, DATA, DATA + DATA_SIZE, 1);
        Run twice = fill(DATA, DATA_SIZE, DATA, DATA + DATA_SIZE, 2);
        assertEquals(DATA_SIZE / 4096, once.marked(), "one mark per page of the range");
        assertEquals(once.marked(), twice.marked(), "no mark after the range was stored over");
        assertEquals(2 * once.executed(), twice.executed());
    }

    @Test void repStosOutsideTheRangeMarksNothing() {
        Run r = fill(OTHER, 0x1000, DATA, DATA + DATA_SIZE);
        assertEquals(0, r.marked());
        assertEquals(4 + 0x1000, r.executed());
    }
}
