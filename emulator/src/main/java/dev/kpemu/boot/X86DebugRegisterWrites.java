package dev.kpemu.boot;

import dev.kpemu.image.ElfImage;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.x86.X86Machine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;

/**
 * Where the kernel writes a debug register, so the host sees the guest's DR0–DR7 change
 * ({@link dev.kpemu.machine.x86.X86DebugRegisters}): Unicorn has no hook on {@code mov %reg,%drN}
 * ({@code 0f 23 /r}), but ends its translated block after one, so the next instruction starts a
 * block and a host breakpoint there (guest text untouched) runs after every such write. The sites
 * are the byte pattern {@code 0f 23} followed by a register-form ModRM byte in the vmlinux's
 * {@code .text} (Linux's {@code native_set_debugreg}, inlined or not, and its callers); a match
 * inside another instruction's bytes costs a breakpoint that a block start never reaches, or a
 * resynchronisation that changes nothing ({@code sync} is idempotent). Module text is not scanned.
 */
final class X86DebugRegisterWrites {
    private X86DebugRegisterWrites() {}

    /** The addresses just after each {@code mov %reg,%drN} of the kernel's {@code .text}. */
    static List<Long> sitesAfter(ElfImage vmlinux) throws KernelImageException {
        var text = vmlinux.section(".text");
        List<Long> sites = new ArrayList<>();
        if (text.isEmpty()) return sites;
        long base = text.get().addr(), start = text.get().offset();
        int[] last = {-1, -1};      // the two bytes before the chunk, across chunk boundaries
        vmlinux.copyFileRange(start, text.get().size(), (fileOffset, data, from, n) -> {
            for (int i = 0; i < n; i++) {
                int b = data[from + i] & 0xff;
                if (last[0] == 0x0f && last[1] == 0x23 && b >= 0xc0) sites.add(base + (fileOffset - start) + i + 1);
                last[0] = last[1];
                last[1] = b;
            }
        });
        return sites;
    }

    /** The kernel file the last sites were found in (path, size, modification time, file key) and those sites. */
    private record Found(String file, List<Long> sites) {}

    private static Found last;

    /**
     * As {@link #sitesAfter(ElfImage)} for {@code vmlinux} read from {@code kernelFile}, from memory
     * when the last scan in this JVM was of the same file unchanged (its path, size, modification
     * time and file key): the rows of an exploration ({@code kpemu faults}) boot one machine each
     * and would scan the same text a row (~25 ms CPU).
     */
    static List<Long> sitesAfter(Path kernelFile, ElfImage vmlinux) throws KernelImageException {
        String file = null;
        try {
            BasicFileAttributes a = Files.readAttributes(kernelFile, BasicFileAttributes.class);
            file = kernelFile.toAbsolutePath() + "\n" + a.size() + "\n" + a.lastModifiedTime().toMillis() + "\n" + a.fileKey();
        } catch (IOException | RuntimeException e) {
            // scan it
        }
        synchronized (X86DebugRegisterWrites.class) {
            if (file != null && last != null && last.file().equals(file)) return last.sites();
        }
        List<Long> sites = BootRunner.keptSites("x86-64 debug-register writes in .text", kernelFile, () -> sitesAfter(vmlinux));
        if (file != null) {
            synchronized (X86DebugRegisterWrites.class) {
                last = new Found(file, sites);
            }
        }
        return sites;
    }

    /** Sets the host breakpoints that resynchronise {@code m}'s guest debug registers; returns their number. */
    static int watch(X86Machine m, Path kernelFile, ElfImage vmlinux) throws KernelImageException {
        int n = 0;
        for (long at : sitesAfter(kernelFile, vmlinux)) {
            if (m.hasBreakpoint(at)) continue;
            m.addBreakpoint(at, (mm, pc) -> {
                m.debugRegisters().sync();
                return true;
            });
            n++;
        }
        return n;
    }
}
