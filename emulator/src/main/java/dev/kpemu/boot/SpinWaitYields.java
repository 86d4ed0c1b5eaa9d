package dev.kpemu.boot;

import dev.kpemu.image.FileBytes;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Machine;

import java.util.ArrayList;
import java.util.List;

/**
 * Several vCPUs: a vCPU that waits in a spin loop ends its quantum at once when another vCPU can
 * run (KVM's pause-loop exiting, made deterministic; docs/smp-notes.md, "Where the time of several
 * CPUs goes"). The machine runs its vCPUs in turn on one host thread, so what a spinning vCPU
 * waits for (a lock's holder, an IPI's handler, a flag another CPU sets) cannot happen during its
 * quantum; spinning it out only delays the others. Linux spins with x86's {@code pause}
 * ({@code cpu_relax}, the queued spinlocks, {@code csd_lock_wait}) and arm64's {@code wfe}
 * ({@code __cmpwait}, {@code smp_cond_load_*}) and {@code yield} ({@code cpu_relax}). A host
 * breakpoint at each of these (guest text untouched) runs {@link Machine#yieldQuantum}. Host
 * breakpoints stop only where a translated block starts; a spin loop's hint is its head (the target
 * of the loop's backward branch) or follows the loop's exit test (a conditional branch ends a
 * block), so it starts a block on every turn of the loop, though not always on the first (which
 * may fall into it). Breakpoints just after the hints too (a loop entered by a jump to its test)
 * yielded far more often and cost more than they saved: x86-64 6.1, 4 CPUs, 74,234 yields (most
 * at {@code rwsem_spin_on_owner} and seqcount retries, a re-yield at every turn of the schedule)
 * and 4.6 times the switches, for 0.4 % fewer instructions than the hints alone (356 yields).
 * The sites come from the kernel's text as its file holds it (x86: the bytes {@code f3 90} in the
 * vmlinux's {@code .text}, a match inside another instruction costing a breakpoint a block start
 * never reaches, or at worst an early end of a quantum; arm64: the aligned words of {@code wfe}
 * and {@code yield} from {@code _stext} to {@code _etext} in the Image), so a machine restored
 * from a snapshot gets the same ones. They share the instruction clock's host breakpoint list
 * (4,096 entries): 6.1 has 325 x86 sites, arm64 Images have up to 508 (6.1), 874 (6.12) and
 * 1,115 (7.2) such words in all. Module and user text are not
 * scanned. Only with more than one vCPU: one vCPU's run is unchanged.
 */
final class SpinWaitYields {
    private SpinWaitYields() {}

    /** arm64 {@code wfe} and {@code yield} (hint instructions, {@code d503201f | op << 5}). */
    static final int ARM64_WFE = 0xd503_205f, ARM64_YIELD = 0xd503_203f;

    /** The address of each x86 {@code pause} ({@code f3 90}) of text at {@code textVa}, handed out by {@code bytes}. */
    static List<Long> x86Sites(long textVa, long fileStart, Source bytes) throws KernelImageException {
        List<Long> sites = new ArrayList<>();
        int[] last = {-1};
        bytes.copy((fileOffset, data, from, n) -> {
            for (int i = 0; i < n; i++) {
                int b = data[from + i] & 0xff;
                if (last[0] == 0xf3 && b == 0x90) sites.add(textVa + (fileOffset - fileStart) + i - 1);
                last[0] = b;
            }
        });
        return sites;
    }

    /** The address of each arm64 {@code wfe} or {@code yield} of text at {@code textVa} (4-byte aligned), handed out by {@code bytes}. */
    static List<Long> arm64Sites(long textVa, long fileStart, Source bytes) throws KernelImageException {
        List<Long> sites = new ArrayList<>();
        int[] word = {0};
        bytes.copy((fileOffset, data, from, n) -> {
            for (int i = 0; i < n; i++) {
                long at = fileOffset - fileStart + i;
                int shift = (int) (at & 3) * 8;
                word[0] = shift == 0 ? data[from + i] & 0xff : word[0] | (data[from + i] & 0xff) << shift;
                if (shift == 24 && (word[0] == ARM64_WFE || word[0] == ARM64_YIELD)) sites.add(textVa + at - 3);
            }
        });
        return sites;
    }

    /** Hands the text's bytes to a sink in chunks, as the kernel file's readers do. */
    @FunctionalInterface
    interface Source {
        void copy(FileBytes.ChunkSink sink) throws KernelImageException;
    }

    /**
     * Host breakpoints at {@code sites} that end the current vCPU's quantum when another can run;
     * none with one vCPU, none where a breakpoint is set already. Returns their number.
     */
    static int yieldAt(Machine m, List<Long> sites) {
        if (m.cpuCount() < 2) return 0;
        List<Long> free = new ArrayList<>();
        for (long at : sites) if (!m.hasBreakpoint(at)) free.add(at);
        long[] vas = free.stream().mapToLong(Long::longValue).toArray();
        m.addBreakpoints(vas, (mm, pc) -> {
            mm.yieldQuantum();
            return true;
        });
        return vas.length;
    }
}
