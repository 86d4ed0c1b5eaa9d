package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.SymbolTable;
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
    @Test
    void arm64RodataPointersPrintAsHexLikeLinux() throws Exception {
        SymbolTable syms = Kallsyms.load(GuestImages.forRepository().kernel(Arch.ARM64, KernelChoice.DEFAULT)).symbols();
        assertEquals("0xffff800008d40e00", syms.format(0xffff800008d40e00L));
        assertEquals("0xffff800008d401c0", syms.format(0xffff800008d401c0L));
        assertEquals("do_dentry_open+0x1bc/0x490", syms.format(syms.address("do_dentry_open") + 0x1bc));
    }
}
