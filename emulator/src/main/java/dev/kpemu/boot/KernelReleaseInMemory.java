package dev.kpemu.boot;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * The kernel release ({@link LinuxGuest#release}) last read in this JVM, kept by arch and symbol
 * table (the same object for runs on the same kernel file, build and cache:
 * {@link dev.kpemu.image.KernelSymbolsInMemory}). On Debian's arm64 Image the release is found by
 * searching the file (~24 ms CPU), and a run asks for it twice: the rows of an exploration
 * ({@code kpemu faults}) read it once.
 */
final class KernelReleaseInMemory {
    private record Kept(Arch arch, SymbolTable syms, String release) {}

    private static Kept last;

    private KernelReleaseInMemory() {}

    static String of(LinuxGuest guest) {
        SymbolTable syms;
        try {
            syms = guest.symbols();
        } catch (RuntimeException e) {
            return guest.releaseFromFile();   // no symbols: nothing to key it by
        }
        synchronized (KernelReleaseInMemory.class) {
            Kept k = last;
            if (k != null && k.arch() == guest.arch() && k.syms() == syms) return k.release();
        }
        String release = guest.releaseFromFile();
        synchronized (KernelReleaseInMemory.class) {
            last = new Kept(guest.arch(), syms, release);
        }
        return release;
    }
}
