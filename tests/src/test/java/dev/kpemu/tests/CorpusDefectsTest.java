package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.kprobes.events.DefinitionCheck;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.machine.Arch;

/**
 * kpemu defects the differential corpus found ({@link CorpusTraceTest}), each against what Linux
 * itself printed for it under QEMU (guest-images/reference/ARCH/6.1/corpus.trace, seed 11).
 */
@Tag("kernel")
class CorpusDefectsTest {
    /**
     * arm64 6.1 is built without CONFIG_KALLSYMS_ALL: %pS resolves only text, so a pointer into
     * rodata prints as hex. Linux printed {@code a0=0xffff800008d40e00} for
     * {@code p:c354 __dentry_path a0=+96(%x0):symbol} (corpus, first recording, commit 2 of branch
     * corpus) and {@code a3=do_dentry_open+0x1bc/0x490} for {@code %x30:symbol} at proc_reg_open;
     * kpemu printed {@code _etext+0x40e00/0x960000} (the table's _etext is typed 'D', which made
     * it read the table as KALLSYMS_ALL's).
     */
    /**
     * How Debian's 6.1 stores string arguments ({@code store_trace_args}), in Linux's own words:
     * the corpus recorded {@code p:c131 __attach_mnt a0=+56(+16(+240(%si))):string a1=\"kp"} as
     * {@code a0="kp" a1="kp"} (a dereference faulted: a0's {@code __data_loc} stays pointed at the
     * next string), {@code p:c255 filldir64 a0=$stack0:symstr a1=@system_state:u32 a2=\"x"} as
     * {@code a0="dcache_readdir+0x1ce/0x250x"} and {@code a0=$stack0:symstr ... a3=$comm} as
     * {@code "__put_mountpoint.part.0+0x44/0x80mount"} (symstr leaves its NUL uncounted), kpemu
     * {@code (fault)} and the symbol alone. The script {@code guest-images/reference/fetchquirks.ARCH.events}
     * holds each case once on do_sys_openat2 (dfd = AT_FDCWD, so {@code +0(+0(%di))} faults in the
     * dereference and {@code +0(%di)} in the string's read), and its trace was recorded by
     * {@code guest-images/record-reference.sh ARCH fetchquirks}: {@code a="cat" c="cat"},
     * {@code n=1 a=(fault)}, {@code a=(fault) c="cat"}, {@code s="__x64_sys_openat+0x6a/0xa0cat"},
     * {@code s="__x64_sys_openat+0x6a/0xa0"}, and {@code s="..." a=""} (a faulting dereference after
     * a symstr points at the symbol's NUL). kpemu's boot must print the same, event by event.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void stringStorageFollowsLinux61(Arch arch) throws Exception {
        new KernelMatrixTest().traceEqualsLinuxOwn("bookworm", arch, "fetchquirks");
    }

    /**
     * Kretprobes on functions a dying task never leaves (do_exit, do_task_dead, exit_group): Linux
     * gives a task's kretprobe instances back when the task is freed, so with more exits than
     * maxactive (r40, about 50 exits) every entry still sees the trampoline in its return slot. Linux printed
     * {@code s=arch_rethook_trampoline+0x0/0x60} at all 50 do_exit entries of the workload (arm64:
     * {@code __kretprobe_trampoline+0x0/0xcc}, 51) under QEMU ({@code record-reference.sh ARCH
     * exitpath}); kpemu, which never gave them back, printed the real caller from the eleventh
     * exit on ({@code do_syscall_64+0x5d/0xb0} in the corpus, seed 11, c388).
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void dyingTasksGiveTheirKretprobeInstancesBack(Arch arch) throws Exception {
        new KernelMatrixTest().traceEqualsLinuxOwn("bookworm", arch, "exitpath");
    }

    /**
     * An optimized (jump) probe's event reads its registers as the handler sees them: x86
     * {@code %ip} is probe + 1, as Linux's {@code optimized_callback} sets it. kpemu's fetches read
     * the live vCPU instead, whose rip is in the detour: the corpus (seed 11) had
     * {@code p:c75 put_files_struct+43 ... a1=%ip:symbol} print {@code 0xffffffff80e010e0} where
     * Linux printed {@code put_files_struct+0x2c/0xd0}. The optip script
     * ({@code record-reference.sh x86_64 optip}) holds it alone: Linux printed
     * {@code ip=put_files_struct+0x2c/0xd0} at all 24 hits.
     */
    @Test
    void optimizedProbesReadTheHandlersRegisters() throws Exception {
        new KernelMatrixTest().traceEqualsLinuxOwn("bookworm", Arch.X86_64, "optip");
    }

    /**
     * A kprobe on an ftrace site (x86 function entry, {@code [FTRACE]}) reads what Linux's ftrace
     * trampoline leaves: {@code %orig_ax} 0, not an int3 frame's -1, and the trampoline call's
     * return address just below the stack pointer. Linux printed
     * {@code oax=0 below=do_sys_openat2+0x5/0x...} at every hit on 6.1, 6.12 and 7.2 under QEMU
     * ({@code record-reference.sh --kernel debian:SUITE x86_64 ftraceregs}); kpemu printed
     * {@code oax=-1} and whatever an earlier call had left below the stack pointer.
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"bookworm", "trixie", "sid"})
    void ftraceSiteProbesSeeTheTrampolinesFrame(String suite) throws Exception {
        new KernelMatrixTest().traceEqualsLinuxOwn(suite, Arch.X86_64, "ftraceregs");
    }

    /**
     * arm64 static-branch sites on Debian's 6.1, whose symbols do not bound {@code __jump_table}
     * (no CONFIG_KALLSYMS_ALL): Linux refuses probes there, kpemu accepted them (the corpus, seed
     * 11: Linux refused {@code p ___slab_alloc+816} and {@code p acct_collect+172}, both a NOP).
     * Linux's answers to them and to their neighbours were recorded under QEMU
     * ({@code record-error-log.sh --kernel debian:bookworm arm64 jumplabel}); kpemu, which now
     * finds the table by its shape, must answer each the same: accepted, or the same errno and
     * error_log.
     */
    @Test
    void arm64JumpLabelSitesAreRefusedAsLinuxRefusesThem() throws Exception {
        Path file = KernelTraceRegressionTest.REFERENCE.resolve("arm64/6.1/jumplabel.error_log");
        RecordedErrorLog recorded = RecordedErrorLog.read(file);
        Path k = KernelMatrixTest.kernel("bookworm", Arch.ARM64);
        assertEquals(KernelMatrixTest.version("bookworm", Arch.ARM64).get("release"), recorded.kernel(), "recorded on the kernel the test boots");
        Kallsyms.KernelText kernel = Kallsyms.load(k);
        List<String> wrong = new ArrayList<>();
        try (KernelProbeSites sites = new KernelProbeSites(Arch.ARM64, kernel.symbols(), kernel.bytes())) {
            KallsymsSymbols symbols = KallsymsSymbols.forKernel(kernel.symbols(), Arch.ARM64, kernel.bytes());
            for (RecordedErrorLog.Answer want : recorded.answers()) {
                DefinitionCheck.Outcome got = new DefinitionCheck(Arch.ARM64, Dialect.forRelease(recorded.kernel()), symbols, sites).check(want.definition());
                if (want.accepted() != got.accepted()) {
                    wrong.add(want.definition() + ": Linux " + (want.accepted() ? "accepts" : "refuses") + ", kpemu "
                            + (got.accepted() ? "accepts" : "refuses: " + got.error().errorLog().replace("\n", " | ")));
                } else if (!want.accepted()) {
                    List<String> log = got.error().logged() ? List.of(got.error().errorLog().split("\n")) : List.of();
                    if (want.errno() != got.error().errno() || !want.errorLog().equals(log))
                        wrong.add(want.definition() + ": Linux " + want.errno() + " " + want.errorLog() + ", kpemu " + got.error().errno() + " " + log);
                }
            }
        }
        assertTrue(recorded.answers().size() >= 8, "the recording holds the sites: " + recorded.answers().size());
        assertTrue(wrong.isEmpty(), String.join("\n", wrong));
    }

    @Test
    void arm64RodataPointersPrintAsHexLikeLinux() throws Exception {
        SymbolTable syms = Kallsyms.load(GuestImages.forRepository().kernel(Arch.ARM64, KernelChoice.DEFAULT)).symbols();
        assertEquals("0xffff800008d40e00", syms.format(0xffff800008d40e00L));
        assertEquals("0xffff800008d401c0", syms.format(0xffff800008d401c0L));
        assertEquals("do_dentry_open+0x1bc/0x490", syms.format(syms.address("do_dentry_open") + 0x1bc));
    }
}
