package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/** Generic kprobes semantics, one body for both arches. */
class KprobesBehaviourTest {

    static Errno errno(Runnable r) {
        return assertThrows(KprobeException.class, r::run).errno();
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registrationErrorsAreTheKernels(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            assertEquals(Errno.EINVAL, errno(() -> k.register(Kprobe.atBoth(g.sym("kprobe_target"), "kprobe_target", 0))));
            assertEquals(Errno.ENOENT, errno(() -> k.register(Kprobe.at("no_such_function", 0))));
            assertEquals(Errno.ENOENT, errno(() -> k.register(Kprobe.at(0x1234))), "address in no symbol");
            Kprobe p = Kprobe.at("kprobe_target", 0);
            k.register(p);
            assertEquals(Errno.EINVAL, errno(() -> k.register(p)), "same probe twice");
            assertEquals(Errno.EINVAL, errno(() -> k.register(Kretprobe.at("kprobe_target", 4))), "kretprobe not at entry");
            assertEquals(Errno.E2BIG, errno(() -> k.register(Kretprobe.at("kprobe_target2").dataSize(4097))));
            assertEquals(Errno.EINVAL, errno(() -> k.register(Kprobe.at(k.trampolineAddress()))), "slot memory");
            assertEquals(Errno.EINVAL, errno(() -> k.disable(Kprobe.at("kprobe_target2", 0))), "disable unregistered");
            assertEquals(g.sym("kprobe_target"), p.address(), "address canonicalised");
            assertTrue((p.flags() & Kprobe.FLAG_ON_FUNC_ENTRY) != 0);
        }
    }

    /**
     * A handler that touches unmapped memory is Linux's "fault in a handler": the hit counts as
     * missed and the fault handler gets the arch's trap number — x86 14 ({@code X86_TRAP_PF},
     * arch/x86/include/asm/trapnr.h), arm64 the data abort's exception class 0x25
     * ({@code ESR_ELx_EC_DABT_CUR}, arch/arm64/include/asm/esr.h); the guest goes on.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aHandlersMemoryFaultReachesTheFaultHandlerWithTheArchsTrapNumber(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<Integer> traps = new ArrayList<>();
            Kprobe p = Kprobe.at("kprobe_target", 0)
                    .pre((pr, r) -> (int) r.readLong(0x7ff0_dead_0000L))
                    .fault((pr, r, trapnr) -> { traps.add(trapnr); return 0; });
            k.register(p);
            assertEquals(30, g.call("kprobe_target", 90), "the guest goes on");
            assertEquals(List.of(arch == Arch.X86_64 ? 14 : 0x25), traps);
            assertEquals(1, p.nmissed());
            assertEquals(1, k.handlerFailures());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registerAllRollsBackOnFailure(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            int[] hits = {0};
            Kprobe good = Kprobe.at("kprobe_target", 0).pre((p, r) -> ++hits[0] * 0);
            Kprobe bad = Kprobe.at("no_such_function", 0);
            assertEquals(Errno.ENOENT, errno(() -> k.registerAll(List.of(good, bad))));
            assertFalse(good.isRegistered());
            assertEquals("", k.list());
            g.call("kprobe_target", 9);
            assertEquals(0, hits[0]);
            assertFalse(k.isArmed(g.sym("kprobe_target")));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aggregatedProbesRunNewestFirstAndANonZeroPreStopsTheRest(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<String> order = new ArrayList<>();
            Kprobe a = Kprobe.at("kprobe_target", 0).pre((p, r) -> { order.add("a"); return 0; }).post((p, r, f) -> order.add("a-post"));
            Kprobe b = Kprobe.at("kprobe_target", 0).pre((p, r) -> { order.add("b"); return 0; }).post((p, r, f) -> order.add("b-post"));
            Kprobe c = Kprobe.at("kprobe_target", 0).pre((p, r) -> { order.add("c"); return 0; });
            k.registerAll(List.of(a, b, c));
            assertEquals(30, g.call("kprobe_target", 90));
            assertEquals(List.of("c", "b", "a", "b-post", "a-post"), order);
            assertEquals(3, k.list().lines().count());
            k.disable(b);
            order.clear();
            g.call("kprobe_target", 90);
            assertEquals(List.of("c", "a", "a-post"), order);
            assertTrue(k.list().contains("[DISABLED]"));
            assertEquals(1, k.list().lines().filter(l -> l.endsWith("[DISABLED]")).count());
            k.enable(b);
            k.unregister(c);
            order.clear();
            g.call("kprobe_target", 90);
            assertEquals(List.of("b", "a", "b-post", "a-post"), order);
            k.unregisterAll(List.of(a, b));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void globalDisarmKeepsEachProbesOwnState(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            int[] hits = {0, 0};
            Kprobe a = Kprobe.at("kprobe_target", 0).pre((p, r) -> { hits[0]++; return 0; });
            Kprobe b = Kprobe.at("kprobe_target2", 0).pre((p, r) -> { hits[1]++; return 0; }).disabled();
            k.registerAll(List.of(a, b));
            assertFalse(k.isArmed(g.sym("kprobe_target2")), "registered disabled");
            k.disarmAll();
            assertFalse(k.allArmed());
            g.call("kprobe_target", 3);
            g.call("kprobe_target2", 3);
            assertArrayEquals(new int[] {0, 0}, hits);
            Kprobe late = Kprobe.at("kprobe_recursed_target", 0);
            k.register(late);
            assertFalse(k.isArmed(late.address()), "probes registered while disarmed stay disarmed");
            k.armAll();
            g.call("kprobe_target", 3);
            g.call("kprobe_target2", 3);
            assertArrayEquals(new int[] {1, 0}, hits, "b is still disabled");
            assertTrue(b.isDisabled());
            assertTrue(k.isArmed(late.address()));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void listLinesHaveTheDebugfsFormat(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            k.register(Kprobe.at("kprobe_target2", 4));
            k.register(Kretprobe.at("kprobe_target"));
            String list = k.list();
            assertTrue(list.contains(String.format("%016x  k  kprobe_target2+0x4    \n", g.sym("kprobe_target2") + 4)), list);
            assertTrue(list.contains(String.format("%016x  r  kprobe_target+0x0    \n", g.sym("kprobe_target"))), list);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void unregisterRestoresTheBytesExactly(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            byte[] before = g.machine.readVirtual(g.sym("kprobe_target"), 0x100);
            Kprobe p = Kprobe.at("kprobe_target", 0);
            Kretprobe rp = Kretprobe.at("kprobe_target");
            Kprobe mid = Kprobe.at(g.find("kprobe_target", arch == Arch.X86_64 ? "div" : "udiv"));
            k.register(p);
            k.register(rp);
            k.register(mid);
            byte[] armed = g.machine.readVirtual(g.sym("kprobe_target"), 0x100);
            assertFalse(java.util.Arrays.equals(before, armed));
            k.unregister(p);
            k.unregister(mid);
            k.unregister(rp);
            assertArrayEquals(before, g.machine.readVirtual(g.sym("kprobe_target"), 0x100));
            assertEquals(1, k.slotsInUse(), "only the trampoline remains");
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void preHandlerChangesThePath(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long target2 = g.sym("kprobe_target2");
            boolean[] post = {false};
            Kprobe p = Kprobe.at("kprobe_target", 0).pre((kp, r) -> {
                r.setIp(target2); // a tail call to kprobe_target2 with the same arguments and return address
                return 1;
            }).post((kp, r, f) -> post[0] = true);
            k.register(p);
            assertEquals(30 + 1, g.call("kprobe_target", 90));
            assertFalse(post[0], "no post handler after a path change");
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void handlerExceptionIsCaughtCountedAndHarmless(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> { throw new IllegalStateException("handler bug"); }));
            assertEquals(30, g.call("kprobe_target", 90));
            assertEquals(10, g.call("kprobe_target", 30));
            assertEquals(2, k.handlerFailures());
            assertEquals("handler bug", k.lastHandlerFailure().getMessage());
        }
    }

    /**
     * Documented in kprobes/README.md and ARCHITECTURE.md: external interrupts are held from the
     * hit to the end of the out-of-line step (Linux runs the step with interrupts off), and
     * released once the post handler has run.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void interruptsAreHeldFromTheHitToTheEndOfTheStep(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<Boolean> heldInPost = new ArrayList<>();
            List<Boolean> heldInPre = new ArrayList<>();
            k.register(Kprobe.at("kprobe_target", 0)
                    .pre((p, r) -> { heldInPre.add(g.machine.interruptsHeld()); return 0; })
                    .post((p, r, f) -> heldInPost.add(g.machine.interruptsHeld())));
            assertTrue(k.probesAt(g.sym("kprobe_target")).size() == 1);
            assertEquals(30, g.call("kprobe_target", 90));
            assertEquals(List.of(true), heldInPost, "the step ran out of line with interrupts held");
            assertEquals(1, heldInPre.size());
            assertFalse(g.machine.interruptsHeld(), "released after the post handler");
        }
    }

    /**
     * debugfs kprobes/list walks the kernel's hash table: bucket {@code hash_64(addr, 6)} (Linux's
     * include/linux/hash.h: multiply by GOLDEN_RATIO_64, keep the top 6 bits), then each bucket's
     * list newest first. The expected order is computed here from that definition, not from the
     * engine.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void listIsInTheKernelsHashOrder(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<String> names = List.of("kprobe_target", "kprobe_target2", "kprobe_recursed_target",
                    "kprobe_stacktrace_internal_target", "patchme", "mul_loop", "recurse");
            for (String n : names) k.register(Kprobe.at(n, 0));
            List<String> expected = new ArrayList<>(names);
            java.util.Collections.reverse(expected);          // newest first within a bucket (stable sort keeps it)
            expected.sort(java.util.Comparator.comparingLong(n -> (g.sym(n) * 0x61C8864680B583EBL) >>> (64 - 6)));
            List<String> listed = k.list().lines().map(l -> l.split("\\s+")[2].replace("+0x0", "")).toList();
            assertEquals(expected, listed, k.list());
            List<String> byAddress = new ArrayList<>(names);
            byAddress.sort(java.util.Comparator.comparingLong(g::sym));
            assertFalse(byAddress.equals(listed), "the chosen addresses must not list in address order for this test to mean anything");
        }
    }

    /** Makes {@code function}'s entry an ftrace site for the engine's rules; its address. */
    private static long ftraceSite(Guest g, Kprobes k, String function) {
        long site = g.sym(function);
        k.rules((a, s) -> a == site ? Kprobe.FLAG_FTRACE : 0);
        return site;
    }

    /** kp->flags carries KPROBE_FLAG_FTRACE when the kernel's rules put the probe on an ftrace site, as kprobes/list shows [FTRACE]. */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void ftraceSiteFlagIsInFlagsAndList(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long site = ftraceSite(g, k, "kprobe_target");
            Kprobe onSite = Kprobe.at("kprobe_target", 0), elsewhere = Kprobe.at("kprobe_target2", 0);
            k.register(onSite);
            k.register(elsewhere);
            assertEquals(Kprobe.FLAG_FTRACE, onSite.flags() & Kprobe.FLAG_FTRACE);
            assertEquals(0, elsewhere.flags() & Kprobe.FLAG_FTRACE);
            assertTrue(k.list().lines().anyMatch(l -> l.contains("kprobe_target+0x0") && l.endsWith("[FTRACE]")), k.list());
        }
    }

    /**
     * On an ftrace site a hit writes the ftrace call's return address (the site's successor) just
     * below the stack pointer, where a handler reading memory finds it; a probe whose handlers
     * declare they read no memory ({@link Kprobe#readsNoMemory()}) leaves that slot as it was.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void anFtraceSitesCallFrameIsWrittenOnlyForHandlersThatReadMemory(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long site = ftraceSite(g, k, "kprobe_target");
            long[] seen = new long[2];
            Kprobe.PreHandler look = (p, r) -> {
                seen[0] = r.sp();
                seen[1] = r.readLong(r.sp() - 8);
                return 0;
            };
            Kprobe reads = Kprobe.at("kprobe_target", 0).pre(look);
            k.register(reads);
            g.call("kprobe_target", 9);
            long sp = seen[0];
            assertTrue(seen[1] > site && seen[1] < site + 16, "the successor of the site: " + Long.toHexString(seen[1]));
            k.unregister(reads);

            long canary = 0x5a5a_1234_5678_a5a5L;
            g.machine.writeVirtualLong(sp - 8, canary);
            Kprobe registersOnly = Kprobe.at("kprobe_target", 0).pre(look).readsNoMemory();
            k.register(registersOnly);
            g.call("kprobe_target", 9);
            assertEquals(sp, seen[0], "the same stack pointer at the hit");
            assertEquals(canary, seen[1], "nothing written below the stack pointer");

            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> 0));   // a second child that may read memory
            g.machine.writeVirtualLong(sp - 8, canary);
            g.call("kprobe_target", 9);
            assertTrue(seen[1] > site && seen[1] < site + 16, "written again: " + Long.toHexString(seen[1]));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void faultInTheSteppedCopyReachesTheGuestAtTheOriginalAddress(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long load = g.sym("fault_func");
            int[] hits = {0};
            k.register(Kprobe.at(load).pre((p, r) -> { hits[0]++; return 0; }).post((p, r, f) -> hits[0] += 100));
            long unmapped = arch == Arch.X86_64 ? 0x4000_0000_0000L : 0xffff_0000_4000_0000L;
            assertEquals(-1L, g.call("fault_func", unmapped), "the guest's fixup ran");
            assertEquals(load, g.data(Guest.FAULT_PC), "the guest saw the probed address as the faulting PC");
            assertEquals(1, hits[0], "pre ran, the faulted step ran no post handler");
            g.setData(Guest.SCRATCH, 77);
            assertEquals(77, g.call("fault_func", g.dataVa + Guest.SCRATCH), "and the probe still works");
            assertEquals(102, hits[0]);
            assertFalse(g.machine.interruptsHeld());
        }
    }

    /**
     * With a probe attached, a guest fault anywhere but the engine's slot area is delivered by the
     * machine's native hook (no Java upcall: the native count grows), and a fault of the stepped
     * copy in the slot area still reaches the engine (the native count stays, the guest sees the
     * probed address): delivered natively, the guest would see the slot's address.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void faultsOutsideTheSlotAreaAreNativeWithProbesAttachedAndTheSteppedCopysAreNot(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long load = g.sym("fault_func");
            int[] hits = {0};
            k.register(Kprobe.at(g.sym("kprobe_target")).pre((p, r) -> { hits[0]++; return 0; }));
            long unmapped = arch == Arch.X86_64 ? 0x4000_0000_0000L : 0xffff_0000_4000_0000L;
            assertEquals(-1L, g.call("fault_func", unmapped), "the guest's fixup ran (arm64: the Java path verifies the vector)");
            long before = g.machine.faultsDeliveredNatively();
            assertEquals(-1L, g.call("fault_func", unmapped));
            assertEquals(before + 1, g.machine.faultsDeliveredNatively(), "the fault was delivered natively with a kprobe attached");
            assertEquals(load, g.data(Guest.FAULT_PC));

            k.register(Kprobe.at(load).pre((p, r) -> { hits[0]++; return 0; }));
            long atStep = g.machine.faultsDeliveredNatively();
            assertEquals(-1L, g.call("fault_func", unmapped), "the guest's fixup ran");
            assertEquals(atStep, g.machine.faultsDeliveredNatively(), "the stepped copy's fault went to the engine, not the native hook");
            assertEquals(load, g.data(Guest.FAULT_PC), "the guest saw the probed address as the faulting PC");
            assertEquals(1, hits[0]);
            assertFalse(g.machine.interruptsHeld());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void guestReadsTheBreakpointInProbedTextAndRunsCorrectly(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long target = g.sym("kprobe_target");
            long orig = g.call("read_text", target);
            k.register(Kprobe.at(target));
            long seen = g.call("read_text", target);
            if (arch == Arch.X86_64) assertEquals(0xcc, seen & 0xff, "like Linux, a reader sees the int3");
            else assertEquals(0xd4200080L, seen & 0xffffffffL, "like Linux, a reader sees BRK #4");
            assertTrue(orig != seen);
            assertEquals(30, g.call("kprobe_target", 90));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void guestRewritingProbedTextKeepsSavedBytesInStep(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long fn = g.sym("patchme");
            int[] hits = {0};
            k.register(Kprobe.at(fn).pre((p, r) -> { hits[0]++; return 0; }).post((p, r, f) -> { }));
            assertEquals(1, g.call("patchme"));
            byte[] newText;
            if (arch == Arch.X86_64) {
                newText = new byte[] {(byte) 0xb8, 5, 0, 0, 0, (byte) 0xc3, (byte) 0x90, (byte) 0x90}; // mov $5, %eax; ret
            } else {
                newText = new byte[] {(byte) 0xa0, 0, (byte) 0x80, (byte) 0xd2, (byte) 0xc0, 0x03, 0x5f, (byte) 0xd6}; // mov x0, #5; ret
            }
            g.call("patch_text", fn, java.nio.ByteBuffer.wrap(newText).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong());
            assertEquals(5, g.call("patchme"), "the new instruction runs (re-armed at the next safe point)");
            assertEquals(5, g.call("patchme"));
            assertTrue(hits[0] >= 2, "the probe fires on the rewritten instruction: " + hits[0]);
            assertTrue(k.isArmed(fn));
            byte[] saved = k.savedBytes(fn).orElseThrow();
            assertArrayEquals(java.util.Arrays.copyOf(newText, saved.length), saved, "saved original bytes follow the guest's write");
            k.unregister(k.probesAt(fn).getFirst());
            assertArrayEquals(newText, g.machine.readVirtual(fn, 8), "unregister restores the guest's new text, not stale bytes");
        }
    }

    /**
     * Issue 12: with 10,000 probes registered (on a sled of nops the test writes into the guest's
     * text), the guest rewriting a probed function through another mapping of the same RAM (as
     * Linux's text_poke does) is still adopted: the new instruction runs and the probe fires on it.
     */
    @org.junit.jupiter.api.Test
    void guestRewriteThroughAnAliasIsAdoptedAmongTenThousandProbes() {
        try (Guest g = Guest.create(Arch.X86_64)) {
            // 625 small functions of 16 nops and a ret: a probe on every nop
            long sled = X86Guest.TEXT + 0x8000;
            int functions = 625, perFunction = 16, n = functions * perFunction;
            byte[] text = new byte[functions * (perFunction + 1)];
            java.util.Arrays.fill(text, (byte) 0x90);
            for (int f = 1; f <= functions; f++) text[f * (perFunction + 1) - 1] = (byte) 0xc3;
            g.machine.writeVirtual(sled, text);
            List<SymbolResolver.SymbolInfo> syms = new ArrayList<>();
            for (String name : X86Guest.NAMES) syms.add(new SymbolResolver.SymbolInfo(name, g.sym(name), Guest.FUNCTION_SIZE, true));
            for (int f = 0; f < functions; f++) syms.add(new SymbolResolver.SymbolInfo("sled_" + f, sled + (long) f * (perFunction + 1), perFunction + 1, true));
            try (Kprobes k = Kprobes.attach(g.machine, SymbolResolver.of(syms), g.slots)) {
                int[] sledHits = {0};
                long t0 = System.nanoTime();
                for (int f = 0; f < functions; f++) {
                    for (int i = 0; i < perFunction; i++) {
                        k.register(Kprobe.at(sled + (long) f * (perFunction + 1) + i).pre((p, r) -> { sledHits[0]++; return 0; }));
                    }
                }
                System.out.printf("%d probes registered and armed in %.2f s (host time, informational)%n", n, (System.nanoTime() - t0) / 1e9);
                byte[] newText = {(byte) 0xb8, 5, 0, 0, 0, (byte) 0xc3, (byte) 0x90, (byte) 0x90}; // mov $5, %eax; ret
                long fn = g.sym("patchme");
                assertRewriteThroughAliasAdopted(g, k, fn, fn - X86Guest.KBASE, newText); // the identity mapping of the same page
                assertEquals(0, sledHits[0], "the sled never ran");
                assertEquals(n + 1, k.list().lines().count(), "all probes registered");
            }
        }
    }

    /**
     * A probe on {@code fn} (whose function returns 1), then the guest's {@code patch_text} writes
     * {@code newText} (returning 5) through {@code alias}, another mapping of the same RAM: the new
     * instruction runs, the probe fires on it, and the saved original bytes follow the write.
     */
    static void assertRewriteThroughAliasAdopted(Guest g, Kprobes k, long fn, long alias, byte[] newText) {
        int[] hits = {0};
        k.register(Kprobe.at(fn).pre((p, r) -> { hits[0]++; return 0; }));
        assertEquals(1, g.call("patchme"));
        assertArrayEquals(g.machine.readVirtual(fn, 8), g.machine.readVirtual(alias, 8), "an alias of the same RAM");
        g.call("patch_text", alias, java.nio.ByteBuffer.wrap(newText).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong());
        assertEquals(5, g.call("patchme"), "the guest's new instruction runs");
        assertEquals(2, hits[0], "the probe fired before and after the rewrite");
        assertArrayEquals(java.util.Arrays.copyOf(newText, k.savedBytes(fn).orElseThrow().length), k.savedBytes(fn).orElseThrow(),
                "saved original bytes follow the guest's write");
    }

    /**
     * The same on arm64, where the block hook finds guarded text and host breakpoints through one
     * granule bitmap: 10,000 probes on a sled of {@code nop}s, and the guest rewriting a probed
     * function through a second mapping of the same RAM (the kernel VA + 4 GiB, a second level-1
     * entry onto the same blocks) is adopted: the new instruction runs and the probe fires on it.
     */
    @org.junit.jupiter.api.Test
    void arm64GuestRewriteThroughAnAliasIsAdoptedAmongTenThousandProbes() {
        try (Guest g = Guest.create(Arch.ARM64)) {
            long sled = Arm64Guest.TEXT + 0x8000;
            int functions = 625, perFunction = 16, n = functions * perFunction, fnBytes = 4 * (perFunction + 1);
            java.nio.ByteBuffer text = java.nio.ByteBuffer.allocate(functions * fnBytes).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (int f = 0; f < functions; f++) {
                for (int i = 0; i < perFunction; i++) text.putInt(0xd503201f); // nop
                text.putInt(Arm64Guest.RET);
            }
            g.machine.writeVirtual(sled, text.array());
            List<SymbolResolver.SymbolInfo> syms = new ArrayList<>();
            for (String name : Arm64Guest.NAMES) syms.add(new SymbolResolver.SymbolInfo(name, g.sym(name), Guest.FUNCTION_SIZE, true));
            for (int f = 0; f < functions; f++) syms.add(new SymbolResolver.SymbolInfo("sled_" + f, sled + (long) f * fnBytes, fnBytes, true));
            // the alias: level-1 entry 4 of the TTBR1 tables points at the same level-2 table
            long l1 = Arm64Guest.TABLES_PA + 0x2000, l2 = Arm64Guest.TABLES_PA + 0x3000, aliasOffset = 4L << 30;
            g.machine.memory().writeLong(l1 + 8 * (((Arm64Guest.KVA + aliasOffset) >>> 30) & 0x1ff), l2 | 3);
            g.machine.engine().flushTlb();
            try (Kprobes k = Kprobes.attach(g.machine, SymbolResolver.of(syms), g.slots)) {
                int[] sledHits = {0};
                for (int f = 0; f < functions; f++) {
                    for (int i = 0; i < perFunction; i++) {
                        k.register(Kprobe.at(sled + (long) f * fnBytes + 4L * i).pre((p, r) -> { sledHits[0]++; return 0; }));
                    }
                }
                byte[] newText = {(byte) 0xa0, 0, (byte) 0x80, (byte) 0xd2, (byte) 0xc0, 0x03, 0x5f, (byte) 0xd6}; // mov x0, #5; ret
                long fn = g.sym("patchme");
                assertRewriteThroughAliasAdopted(g, k, fn, fn + aliasOffset, newText);
                assertEquals(0, sledHits[0], "the sled never ran");
                assertEquals(n + 1, k.list().lines().count(), "all probes registered");
                k.unregister(k.probesAt(fn).getFirst());
                assertArrayEquals(newText, g.machine.readVirtual(fn, 8), "unregister restores the guest's new text, not stale bytes");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void blacklistIsRefusedUnlessOptedIn(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            SymbolResolver syms = g.symbols();
            assertEquals(0, k.blacklist().addFunctions(new long[] {g.sym("nokprobe_func")}, syms));
            assertEquals(Errno.EINVAL, errno(() -> k.register(Kprobe.at("nokprobe_func", 0))));
            assertTrue(k.blacklist().debugfs().contains(String.format("0x%016x-0x%016x\tnokprobe_func", g.sym("nokprobe_func"), g.sym("nokprobe_func") + 0x100)));
            k.allowUnsafe(true);
            Kprobe p = Kprobe.at("nokprobe_func", 0);
            k.register(p);
            assertEquals(42, g.call("nokprobe_func", 42));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kretprobeEntryHandlerDataAndSkip(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<Long> returns = new ArrayList<>();
            Kretprobe rp = Kretprobe.at("kprobe_target").dataSize(8)
                    .entryHandler((ri, r) -> {
                        java.nio.ByteBuffer.wrap(ri.data()).putLong(r.arg(0));
                        return r.arg(0) == 6 ? 1 : 0; // skip this invocation
                    })
                    .handler((ri, r) -> {
                        returns.add(java.nio.ByteBuffer.wrap(ri.data()).getLong() * 1000 + r.returnValue());
                        return 0;
                    });
            k.register(rp);
            assertEquals(10, rp.maxactive(), "default max(10, 2 x NR_CPUS)");
            g.call("kprobe_target", 9);
            g.call("kprobe_target", 6);
            g.call("kprobe_target", 12);
            assertEquals(List.of(9003L, 12004L), returns);
            assertEquals(0, rp.nmissed());
            assertEquals(0, k.outstandingInstances());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kretprobeInstancesOutliveTheirProbe(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            g.setData(Guest.TARGET_PTR, g.sym("kprobe_stacktrace_target"));
            g.setData(Guest.INTERNAL_PTR, g.sym("kprobe_stacktrace_internal_target"));
            long expected = g.call("kprobe_stacktrace_driver");
            int[] ran = {0};
            Kretprobe rp = Kretprobe.at("kprobe_stacktrace_target").handler((ri, r) -> { ran[0]++; return 0; });
            k.register(rp);
            Kprobe unregisterer = Kprobe.at("kprobe_stacktrace_internal_target", 0).pre((p, r) -> {
                k.unregister(rp); // while kprobe_stacktrace_target's instance is outstanding
                return 0;
            });
            k.register(unregisterer);
            assertEquals(expected, g.call("kprobe_stacktrace_driver"), "returns to the real caller");
            assertEquals(0, ran[0], "no handler for an unregistered kretprobe");
            assertEquals(0, k.outstandingInstances());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kretprobeMaxactiveExhaustionCountsMisses(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<Long> returns = new ArrayList<>();
            Kretprobe rp = Kretprobe.at("recurse").maxactive(1).handler((ri, r) -> { returns.add(r.returnValue()); return 0; });
            k.register(rp);
            assertEquals(2, g.call("recurse", 2));
            assertEquals(2, rp.nmissed(), "depth 3 with one instance: the two inner entries miss");
            assertEquals(List.of(2L), returns, "the outermost invocation was traced");
            assertEquals(3, g.call("recurse", 3));
            assertEquals(5, rp.nmissed());
        }
    }
}
