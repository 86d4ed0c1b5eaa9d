package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * {@link Watchpoints} on bare-metal guests of both arches (x86-64 paged identity, arm64 MMU off):
 * each guest program is a list of instructions whose addresses the test knows, so every expected
 * hit (instruction, physical address, size, old and new value) is written by hand.
 */
class WatchpointsTest {
    enum Guest {
        X86(0x100000, 0x300000) {
            @Override Machine create() {
                X86Machine m = X86Machine.create(16 << 20);
                X86LongMode.identityMap(m.memory(), 0x1000, 16 << 20);
                int limit = X86LongMode.writeGdt(m.memory(), 0x5000);
                X86LongMode.enter(m.engine(), 0x5000, limit, 0x1000);
                return m;
            }
            @Override byte[] asm(String src, long at) { return Asm.x86(src, at); }
            @Override String end() { return "hlt"; }
            @Override String load(long pa) { return "mov $" + pa + ", %r9\n mov (%r9), %rax"; }
            @Override String store(long pa, long v) { return "mov $" + pa + ", %r9\n mov $" + v + ", %r10\n mov %r10, (%r9)"; }
            @Override String atomicAdd(long pa, long v) { return "mov $" + pa + ", %r9\n mov $" + v + ", %r10\n lock xadd %r10, (%r9)"; }
            @Override String fill(long pa, long v, int words) {
                return "mov $" + pa + ", %rdi\n mov $" + v + ", %rax\n mov $" + words + ", %rcx\n rep stosq";
            }
        },
        ARM64(Arm64Layout.RAM_BASE, Arm64Layout.RAM_BASE + 0x200000) {
            @Override Machine create() { return Arm64Machine.create(16L << 20); }
            @Override byte[] asm(String src, long at) { return Asm.arm64(src, at); }
            @Override String end() { return "movz x0, #0x8400, lsl #16\n movk x0, #8\n hvc #0"; }
            private String mov(String reg, long v) {
                return "movz " + reg + ", #" + (v & 0xffff) + "\n movk " + reg + ", #" + ((v >>> 16) & 0xffff) + ", lsl #16\n movk "
                        + reg + ", #" + ((v >>> 32) & 0xffff) + ", lsl #32\n movk " + reg + ", #" + ((v >>> 48) & 0xffff) + ", lsl #48";
            }
            @Override String load(long pa) { return mov("x9", pa) + "\n ldr x1, [x9]"; }
            @Override String store(long pa, long v) { return mov("x9", pa) + "\n" + mov("x10", v) + "\n str x10, [x9]"; }
            /** An exclusive pair: the store-exclusive is the access. */
            @Override String atomicAdd(long pa, long v) {
                return mov("x9", pa) + "\n" + mov("x10", v) + "\n ldxr x1, [x9]\n add x1, x1, x10\n stxr w2, x1, [x9]";
            }
            @Override String fill(long pa, long v, int words) {
                return mov("x9", pa) + "\n" + mov("x10", v) + "\n mov x11, #" + words + "\n fill_loop: str x10, [x9], #8\n subs x11, x11, #1\n b.ne fill_loop";
            }
        };

        final long code, data;

        Guest(long code, long data) {
            this.code = code;
            this.data = data;
        }

        abstract Machine create();
        abstract byte[] asm(String src, long at);
        abstract String end();
        abstract String load(long pa);
        abstract String store(long pa, long v);
        abstract String atomicAdd(long pa, long v);
        abstract String fill(long pa, long v, int words);
    }

    /** A program of snippets; {@link #last(int)} is the address of snippet i's last instruction (its access). */
    static final class Program {
        final Guest g;
        final List<String> parts = new ArrayList<>();
        final List<Long> lastInsn = new ArrayList<>();

        Program(Guest g) { this.g = g; }

        Program then(String snippet) {
            String before = String.join("\n", parts);
            int lastLine = snippet.lastIndexOf('\n');
            String head = lastLine < 0 ? "" : snippet.substring(0, lastLine);
            String withHead = before.isEmpty() ? head : head.isEmpty() ? before : before + "\n" + head;
            long at = g.code + (withHead.isEmpty() ? 0 : g.asm(withHead, g.code).length);
            parts.add(snippet);
            lastInsn.add(at);
            return this;
        }

        long last(int i) { return lastInsn.get(i); }

        byte[] bytes() { return g.asm(String.join("\n", parts) + "\n" + g.end(), g.code); }
    }

    static void run(Machine m, Program p) {
        byte[] code = p.bytes();
        m.memory().write(p.g.code, code);
        m.invalidateCode(p.g.code, code.length);
        if (m instanceof Arm64Machine a) a.setReg(Arm64Reg.SP, p.g.code + 0x8000);
        m.setPc(p.g.code);
        StopReason r = m.run(1_000_000);
        assertTrue(r instanceof StopReason.Halted || r instanceof StopReason.PoweredOff, r.toString());
    }

    @ParameterizedTest
    @EnumSource(Guest.class)
    void loadsAndStoresInTheRangeAreReportedWithTheirInstructionAndValues(Guest g) {
        long watched = g.data + 0x100, v = 0x1122_3344_5566_7788L;
        try (Machine m = g.create()) {
            m.memory().writeLong(watched, 0x0101_0101_0101_0101L);
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 16, true, true, hits::add);
            m.memory().writeLong(watched + 8, 0x0202_0202_0202_0202L);   // the host's own write: not a hit
            Program p = new Program(g)
                    .then(g.store(watched, v))               // 0: a store in the range
                    .then(g.load(watched))                   // 1: a load in the range
                    .then(g.store(watched + 16, 5))          // 2: a store on the same page, past the range
                    .then(g.load(watched - 8))               // 3: a load on the same page, before it
                    .then(g.store(watched + 8, 7));          // 4: the range's second word
            run(m, p);
            assertEquals(List.of(
                    new WatchHit(hits.get(0).watch(), 0, p.last(0), watched, 8, true, 0x0101_0101_0101_0101L, v),
                    new WatchHit(hits.get(0).watch(), 0, p.last(1), watched, 8, false, v, v),
                    new WatchHit(hits.get(0).watch(), 0, p.last(4), watched + 8, 8, true, 0x0202_0202_0202_0202L, 7)), hits);
            assertEquals(v, m.memory().readLong(watched), "the watched store is in guest RAM");
            assertEquals(5, m.memory().readLong(watched + 16), "the store past the range too");
            assertEquals(7, m.memory().readLong(watched + 8));
        }
    }

    /** {@code afterAccess}: a handler sees the store made (what a trap-after report reads), the others before it. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aHandlerAfterTheAccessReadsTheStoredValueOneBeforeReadsTheOldOne(Guest g) {
        long watched = g.data + 0x200;
        try (Machine m = g.create()) {
            m.memory().writeLong(watched, 1);
            List<Long> before = new ArrayList<>(), after = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, false, h -> before.add(m.memory().readLong(watched)));
            m.watchpoints().add(watched, 8, false, true, true, h -> after.add(m.memory().readLong(watched)));
            run(m, new Program(g).then(g.store(watched, 2)).then(g.store(watched, 3)));
            assertEquals(List.of(1L, 2L), before, "x86's trap-after handlers see memory as it was");
            assertEquals(List.of(2L, 3L), after, "and after-access handlers as the store left it");
        }
    }

    /** A store starting 4 bytes below a watched page arrives whole, once, with the old and new 8 bytes. */
    /** A store starting 4 bytes below a watched page arrives whole, once, with the old and new 8 bytes. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aStoreCrossingIntoTheWatchedPageIsOneHit(Guest g) {
        long page = g.data + 0x2000, v = 0x8877_6655_4433_2211L;
        try (Machine m = g.create()) {
            m.memory().writeLong(page - 4, 0x0303_0303_0303_0303L);
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(page, 4, false, true, hits::add);
            Program p = new Program(g).then(g.store(page - 4, v));
            run(m, p);
            assertEquals(List.of(new WatchHit(hits.get(0).watch(), 0, p.last(0), page - 4, 8, true, 0x0303_0303_0303_0303L, v)), hits);
            assertEquals(v, m.memory().readLong(page - 4));
        }
    }

    /** x86 {@code lock xadd}, arm64 an exclusive pair: one write with the value before and after. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void anAtomicReadModifyWriteIsOneWrite(Guest g) {
        long watched = g.data + 0x3008;
        try (Machine m = g.create()) {
            m.memory().writeLong(watched, 40);
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, hits::add);
            Program p = new Program(g).then(g.atomicAdd(watched, 2));
            run(m, p);
            assertEquals(List.of(new WatchHit(hits.get(0).watch(), 0, p.last(0), watched, 8, true, 40, 42)), hits);
            assertEquals(42, m.memory().readLong(watched));
        }
    }

    /**
     * A watch on reads and writes: one instruction that reads and writes is one hit, a write with
     * the old and new value (x86 {@code incq}, {@code lock xadd}, {@code add} to memory, as DR7
     * RW=11 traps and gdb's {@code awatch} reports); a load and a store at two instructions stay
     * two hits (arm64's exclusive pair: {@code ldxr} reads, {@code stxr} writes; the A57 has no
     * LSE atomics), and a load ending the program is a read.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void oneInstructionThatReadsAndWritesIsOneHitOfAReadWriteWatch(Guest g) {
        long watched = g.data + 0x7008;
        try (Machine m = g.create()) {
            m.memory().writeLong(watched, 40);
            List<WatchHit> hits = new ArrayList<>();
            Watchpoints.Watch w = m.watchpoints().add(watched, 8, true, true, hits::add);
            Program p = new Program(g);
            List<WatchHit> expected = new ArrayList<>();
            if (g == Guest.X86) {
                p.then("mov $" + watched + ", %r9\n incq (%r9)")               // 0: 40 -> 41
                 .then(g.atomicAdd(watched, 2))                                // 1: 41 -> 43
                 .then("mov $3, %r10\n add %r10, (%r9)");                      // 2: 43 -> 46
                expected.add(new WatchHit(w, 0, p.last(0), watched, 8, true, 40, 41));
                expected.add(new WatchHit(w, 0, p.last(1), watched, 8, true, 41, 43));
                expected.add(new WatchHit(w, 0, p.last(2), watched, 8, true, 43, 46));
            } else {
                p.then(g.atomicAdd(watched, 6));                               // 0: ldxr 40, then stxr 40 -> 46
                expected.add(new WatchHit(w, 0, p.last(0) - 8, watched, 8, false, 40, 40));
                expected.add(new WatchHit(w, 0, p.last(0), watched, 8, true, 40, 46));
                p.then("nop").then("nop");                                     // keeps the indices of the x86 program
            }
            p.then(g.load(watched))                                            // 3: a load
             .then(g.store(watched, 9))                                        // 4: a store at another instruction
             .then(g.load(watched));                                           // 5: a load, the program's last access
            expected.add(new WatchHit(w, 0, p.last(3), watched, 8, false, 46, 46));
            expected.add(new WatchHit(w, 0, p.last(4), watched, 8, true, 46, 9));
            expected.add(new WatchHit(w, 0, p.last(5), watched, 8, false, 9, 9));
            run(m, p);
            assertEquals(expected, hits);
        }
    }

    /**
     * A read of a read-write watch, held in case its instruction stores, is reported by the end of
     * its block: a handler stopping at it stops the guest there, the block's later store (outside
     * the range) made, the next block not run.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aHeldReadIsReportedByTheEndOfItsBlock(Guest g) {
        long watched = g.data + 0x9000, marker = g.data + 0xa000;
        String branch = g == Guest.X86 ? "jmp" : "b";
        try (Machine m = g.create()) {
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 8, true, true, h -> {
                hits.add(h);
                if (hits.size() == 2) m.watchpoints().stopAt(h);
            });
            StringBuilder src = new StringBuilder();
            for (int v = 1; v <= 3; v++)
                src.append(g.load(watched)).append("\n").append(g.store(marker, v)).append("\n ").append(branch).append(" next").append(v)
                   .append("\n next").append(v).append(":\n");
            byte[] code = g.asm(src + g.end(), g.code);
            m.memory().write(g.code, code);
            m.invalidateCode(g.code, code.length);
            if (m instanceof Arm64Machine a) a.setReg(Arm64Reg.SP, g.code + 0x8000);
            m.setPc(g.code);
            StopReason.Watchpoint w = assertInstanceOf(StopReason.Watchpoint.class, m.run(1_000_000));
            assertEquals(hits.get(1), w.hit());
            assertEquals(2, hits.size());
            assertTrue(hits.stream().noneMatch(WatchHit::write), hits.toString());
            assertEquals(2, m.memory().readLong(marker), "the read's block is done, the next not run");
            StopReason end = m.run(1_000_000);
            assertTrue(end instanceof StopReason.Halted || end instanceof StopReason.PoweredOff, end.toString());
            assertEquals(3, hits.size());
        }
    }

    /**
     * x86 {@code lock cmpxchg}: a failed compare still writes (the old value back, as the locked
     * instruction does on hardware), a successful one writes the new value; arm64 {@code stp}: two
     * 8-byte writes at the one instruction.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void compareExchangeAndPairStores(Guest g) {
        long watched = g.data + 0x6000;
        try (Machine m = g.create()) {
            m.memory().writeLong(watched, 40);
            m.memory().writeLong(watched + 8, 50);
            List<WatchHit> hits = new ArrayList<>();
            Watchpoints.Watch w = m.watchpoints().add(watched, 16, false, true, hits::add);
            Program p = new Program(g);
            List<WatchHit> expected;
            if (g == Guest.X86) {
                String cas = "mov $" + watched + ", %r9\n mov $7, %r10\n";
                p.then(cas + "mov $1, %rax\n lock cmpxchg %r10, (%r9)")      // 1 != 40: fails, writes 40 back
                 .then(cas + "mov $40, %rax\n lock cmpxchg %r10, (%r9)");    // succeeds: 40 -> 7
                expected = List.of(new WatchHit(w, 0, p.last(0), watched, 8, true, 40, 40),
                        new WatchHit(w, 0, p.last(1), watched, 8, true, 40, 7));
            } else {
                p.then("movz x9, #" + (watched & 0xffff) + "\n movk x9, #" + ((watched >>> 16) & 0xffff) + ", lsl #16\n mov x10, #7\n mov x11, #8\n stp x10, x11, [x9]");
                expected = List.of(new WatchHit(w, 0, p.last(0), watched, 8, true, 40, 7),
                        new WatchHit(w, 0, p.last(0), watched + 8, 8, true, 50, 8));
            }
            run(m, p);
            assertEquals(expected, hits);
        }
    }

    /** A 4 KiB range filled by a string instruction (x86) or a store loop (arm64): every word once, and nothing after removal. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aPageLongRangeSeesEveryWordAndNothingOnceRemoved(Guest g) {
        long page = g.data + 0x5000;
        try (Machine m = g.create()) {
            List<WatchHit> hits = new ArrayList<>();
            Watchpoints.Watch w = m.watchpoints().add(page, 4096, false, true, hits::add);
            Program p = new Program(g).then(g.fill(page, 9, 512));
            run(m, p);
            assertEquals(512, hits.size());
            for (int i = 0; i < 512; i++) {
                WatchHit h = hits.get(i);
                assertEquals(page + 8L * i, h.physicalAddress());
                assertEquals(8, h.size());
                assertEquals(0, h.oldValue());
                assertEquals(9, h.newValue());
                assertEquals(m.memory().readLong(page + 8L * i), 9);
            }
            m.watchpoints().remove(w);
            hits.clear();
            run(m, new Program(g).then(g.fill(page, 10, 512)));
            assertEquals(List.of(), hits);
            assertEquals(10, m.memory().readLong(page + 4088));
        }
    }

    /** A watch added after the guest ran (its TLB and translations hold the page) sees the next store. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aWatchAddedAfterTheGuestRanSeesTheNextStore(Guest g) {
        long watched = g.data + 0x7000;
        try (Machine m = g.create()) {
            run(m, new Program(g).then(g.store(watched, 1)).then(g.load(watched)));
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, hits::add);
            Program p = new Program(g).then(g.store(watched, 2)).then(g.load(watched));
            run(m, p);
            assertEquals(List.of(new WatchHit(hits.get(0).watch(), 0, p.last(0), watched, 8, true, 1, 2)), hits);
            assertEquals(2, m.memory().readLong(watched));
        }
    }

    /**
     * A handler that stops at the second of three stores, each followed by a branch (a block
     * boundary): the run returns that hit with the second store done and the third not; running
     * again finishes the program and reports the third.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aHandlerStopsTheGuestAtTheEndOfTheAccessingBlock(Guest g) {
        long watched = g.data + 0x8000;
        String branch = g == Guest.X86 ? "jmp" : "b";
        try (Machine m = g.create()) {
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, h -> {
                hits.add(h);
                if (h.newValue() == 2) m.watchpoints().stopAt(h);
            });
            StringBuilder src = new StringBuilder();
            for (int v = 1; v <= 3; v++) src.append(g.store(watched, v)).append("\n ").append(branch).append(" next").append(v).append("\n next").append(v).append(":\n");
            byte[] code = g.asm(src + g.end(), g.code);
            m.memory().write(g.code, code);
            m.setPc(g.code);
            StopReason r = m.run(1_000_000);
            StopReason.Watchpoint w = assertInstanceOf(StopReason.Watchpoint.class, r);
            assertEquals(hits.get(1), w.hit());
            assertEquals(2, hits.size());
            assertEquals(2, m.memory().readLong(watched), "the access is done, the next store not yet");
            StopReason end = m.run(1_000_000);
            assertTrue(end instanceof StopReason.Halted || end instanceof StopReason.PoweredOff, end.toString());
            assertEquals(3, hits.size());
            assertEquals(3, m.memory().readLong(watched));
        }
    }

    /**
     * A handler that stops before the second of three stores: the run returns that hit with the pc
     * at the second store and its value not stored; running again makes it (not reported again)
     * and the third store is reported as usual.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aHandlerStopsTheGuestBeforeTheStore(Guest g) {
        long watched = g.data + 0x9000;
        try (Machine m = g.create()) {
            List<WatchHit> hits = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, h -> {
                hits.add(h);
                if (h.newValue() == 2) m.watchpoints().stopBefore(h);
            });
            Program p = new Program(g).then(g.store(watched, 1)).then(g.store(watched, 2)).then(g.store(watched, 3));
            byte[] code = p.bytes();
            m.memory().write(g.code, code);
            m.setPc(g.code);
            StopReason r = m.run(1_000_000);
            StopReason.Watchpoint w = assertInstanceOf(StopReason.Watchpoint.class, r);
            assertEquals(new WatchHit(w.hit().watch(), 0, p.last(1), watched, 8, true, 1, 2), w.hit());
            assertEquals(p.last(1), m.pc(), "stopped at the store");
            assertEquals(1, m.memory().readLong(watched), "not stored");
            StopReason end = m.run(1_000_000);
            assertTrue(end instanceof StopReason.Halted || end instanceof StopReason.PoweredOff, end.toString());
            assertEquals(List.of(2L, 3L), hits.stream().skip(1).map(WatchHit::newValue).toList(), "the replayed store not reported again");
            assertEquals(3, hits.size());
            assertEquals(3, m.memory().readLong(watched));
        }
    }

    /**
     * A guest debug register's watch ({@link Watchpoints#addTrapping}, arm64's watchpoints) traps a
     * store before it is made and the run goes on (the machine would take the guest's exception;
     * here nothing moves the pc, so the store runs again): the other watch on the same bytes, added
     * first, is told of the store once, when it is made, not of the trapped attempt; the trapping
     * watch is told of both attempts (the second is a new access, which it lets through).
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aTrappedStoreIsNotMadeAndOnlyTheMadeOneIsReportedToOtherWatches(Guest g) {
        long watched = g.data + 0x9000;
        try (Machine m = g.create()) {
            List<WatchHit> others = new ArrayList<>(), trapping = new ArrayList<>();
            m.watchpoints().add(watched, 8, false, true, others::add);
            boolean[] trapped = {false};
            m.watchpoints().addTrapping(watched, 8, h -> {
                trapping.add(h);
                if (h.newValue() == 2 && !trapped[0]) {
                    trapped[0] = true;
                    m.watchpoints().trapBefore(h);
                }
            });
            Program p = new Program(g).then(g.store(watched, 1)).then(g.store(watched, 2)).then(g.store(watched, 3));
            run(m, p);
            assertEquals(List.of(1L, 2L, 3L), others.stream().map(WatchHit::newValue).toList(), "the other watch: each store once");
            assertEquals(List.of(1L, 2L, 2L, 3L), trapping.stream().map(WatchHit::newValue).toList(), "the trapping watch: the trapped attempt and the store");
            assertEquals(trapping.get(1).pc(), trapping.get(2).pc(), "the same instruction again");
            assertEquals(1, trapping.get(2).oldValue(), "the trapped attempt stored nothing");
            assertEquals(3, m.memory().readLong(watched));
        }
    }

    /**
     * 64 watches at once (issue 28): 63 of 8 bytes every 64 bytes of one page and one of 4 KiB on
     * the next page; both pages filled word by word: each small watch sees its one word, the large
     * one all 512, the 441 unwatched words of the first page none.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void sixtyFourWatchesOneOfThemAPageLong(Guest g) {
        long small = g.data + 0xa000, large = g.data + 0xb000;
        try (Machine m = g.create()) {
            java.util.Map<Watchpoints.Watch, List<WatchHit>> byWatch = new java.util.LinkedHashMap<>();
            for (int i = 0; i < 63; i++) {
                List<WatchHit> own = new ArrayList<>();
                byWatch.put(m.watchpoints().add(small + 64L * i, 8, false, true, own::add), own);
            }
            List<WatchHit> big = new ArrayList<>();
            Watchpoints.Watch bigWatch = m.watchpoints().add(large, 4096, false, true, big::add);
            assertEquals(64, m.watchpoints().list().size());
            run(m, new Program(g).then(g.fill(small, 5, 1024)));
            for (var e : byWatch.entrySet()) {
                assertEquals(1, e.getValue().size());
                assertEquals(e.getKey().start(), e.getValue().getFirst().physicalAddress());
                assertEquals(5, e.getValue().getFirst().newValue());
            }
            assertEquals(512, big.size());
            for (WatchHit h : big) assertEquals(bigWatch, h.watch());
            for (int i = 0; i < 1024; i++) assertEquals(5, m.memory().readLong(small + 8L * i));
        }
    }

    @ParameterizedTest
    @EnumSource(Guest.class)
    void aRangeOutsideRamIsRefused(Guest g) {
        try (Machine m = g.create()) {
            assertThrows(IllegalArgumentException.class, () -> m.watchpoints().add(0xfff0_0000_0000L, 8, false, true, h -> {}));
            assertThrows(IllegalArgumentException.class, () -> m.watchpoints().add(g.data, 0, false, true, h -> {}));
        }
    }
}
