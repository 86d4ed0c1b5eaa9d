package dev.kpemu.boot;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * A Linux guest of one architecture, loaded into its machine and ready to run its first
 * instruction: what {@link BootRunner} needs from each arch ({@link X86LinuxGuest},
 * {@link Arm64LinuxGuest}) and what {@link BootHooks} may use.
 */
public interface LinuxGuest extends AutoCloseable {
    /**
     * The RAM at the top of the machine that the guest's memory map (e820 / device tree) leaves
     * out: the kernel never allocates it, so the host can keep its own code there (kprobes'
     * out-of-line slots and trampolines).
     */
    record HostArea(long physicalBase, long size) {}

    /** Bytes of RAM kept for the host at the top of every guest. */
    long HOST_AREA_BYTES = 2L << 20;

    Arch arch();

    Machine machine();

    ConsoleMonitor console();

    /** The receive side of the guest command's terminal UART ({@link GuestTerminal}). */
    interface TerminalPort {
        /** Bytes the receive FIFO takes now. */
        int receiveSpace();

        /** Puts bytes in the receive FIFO (at most {@link #receiveSpace}); raises the receive interrupt. */
        void receive(byte[] bytes);
    }

    /** The command terminal, or null when this boot has none (no {@link BootRunner.Options#terminal}). */
    default TerminalPort terminal() { return null; }

    HostArea hostArea();

    /** The kernel's own symbols (decoded from the image; may take a moment on first call). */
    SymbolTable symbols();

    /**
     * The kernel file as loaded, before the kernel changed anything (init sections included):
     * the bytes {@link SymbolTable#fileOffset} indexes (x86-64: the vmlinux ELF; arm64: the raw
     * Image). For tables the kernel frees or rewrites at boot ({@code __mcount_loc}, the jump table).
     */
    default byte[] kernelFile() { return kernelContents().bytes(); }

    /**
     * The same bytes as {@link #kernelFile}, read only where asked (a range, a scan) until
     * something needs them whole: a boot, or a snapshot-started session, that needs a few ranges
     * does not hold the kernel file on the heap.
     */
    dev.kpemu.image.OnDemandFileBytes kernelContents();

    /**
     * The kernel's own tables about its text ({@link dev.kpemu.image.KernelTextTables}: ftrace
     * sites, the kprobe blacklist, exception, jump-label and other reserved sites), read from
     * {@link #kernelFile}; the guests {@link BootRunner} prepares keep them between runs
     * ({@link dev.kpemu.image.KernelTextTablesCache}).
     */
    default dev.kpemu.image.KernelTextTables kernelTextTables() {
        return dev.kpemu.image.KernelTextTables.read(arch(), symbols(), kernelContents());
    }

    /**
     * The kernel's release ({@code uname -r}) from its banner, or "" when the image has none: at
     * the {@code linux_banner} symbol when the symbols name it (searching the whole file took about
     * 0.1 s of a snapshot-started session), else the first banner in the file.
     */
    default String release() {
        return KernelReleaseInMemory.of(this);
    }

    /** {@link #release()} read from the kernel file, each time. */
    default String releaseFromFile() {
        dev.kpemu.image.OnDemandFileBytes file = kernelContents();
        try {
            var banner = symbols().byName("linux_banner");
            if (banner.isPresent()) {
                var offset = symbols().fileOffset(banner.get().address());
                if (offset.isPresent() && offset.getAsLong() >= 0 && offset.getAsLong() < file.length()) {
                    long at = offset.getAsLong();
                    var r = dev.kpemu.image.KernelRelease.at(file.read(at, (int) Math.min(256, file.length() - at)), 0);
                    if (r.isPresent()) return r.get();
                }
            }
        } catch (RuntimeException e) {
            // no symbols: search the file
        }
        return dev.kpemu.image.KernelRelease.of(file).orElse("");
    }

    /**
     * Structure offsets from the kernel's own BTF ({@code task_struct} comm/pid, the current
     * task), for probe output.
     */
    dev.kpemu.image.btf.KernelStructs kernelStructs() throws dev.kpemu.image.KernelImageException;

    /** One line about what was loaded where, for the trace output. */
    String describe();

    /** External interrupts taken so far. */
    long interrupts();

    /** Device and engine counters for the report. */
    String stats();

    @Override void close();
}
