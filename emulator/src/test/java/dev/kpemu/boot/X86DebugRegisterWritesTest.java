package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The kernel's writes of a debug register found in its text ({@link X86DebugRegisterWrites}), against
 * GNU objdump's disassembly of the same vmlinux's {@code .text}: every {@code mov %reg,%dbN}
 * objdump shows has its breakpoint address (the next instruction) among the sites found.
 */
@Tag("kernel")
class X86DebugRegisterWritesTest {
    @Test
    void everyMovToADebugRegisterObjdumpShowsIsFound() throws Exception {
        var kernel = X86LinuxLoader.readKernel(GuestImages.forRepository().kernel(Arch.X86_64), BootRunner.kernelCacheDir());
        Assumptions.assumeTrue(kernel.vmlinux().section(".text").isPresent(), "a vmlinux with section headers");
        List<Long> sites = X86DebugRegisterWrites.sitesAfter(kernel.vmlinux());
        java.nio.file.Path file = java.nio.file.Files.createTempFile("kpemu-vmlinux", "");
        try {
            java.nio.file.Files.write(file, kernel.vmlinux().bytes());
            Process p;
            try {
                p = new ProcessBuilder("objdump", "-d", "-j", ".text", file.toString()).redirectErrorStream(true).start();
            } catch (java.io.IOException e) {
                Assumptions.abort("no objdump (binutils) on this host");
                return;
            }
            Pattern mov = Pattern.compile("^([0-9a-f]+):\\s+((?:[0-9a-f]{2} )+)\\s*mov\\s+%\\w+,%db[0-7]$");
            TreeSet<Long> objdumps = new TreeSet<>();
            try (var r = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    Matcher m = mov.matcher(l.strip());
                    if (m.matches()) objdumps.add(Long.parseUnsignedLong(m.group(1), 16) + m.group(2).strip().split(" ").length);
                }
            }
            assertTrue(p.waitFor() == 0, "objdump failed");
            assertFalse(objdumps.isEmpty(), "Linux writes its debug registers somewhere");
            assertTrue(sites.containsAll(objdumps), "objdump's " + hex(objdumps) + " among the sites found " + hex(sites));
        } finally {
            java.nio.file.Files.deleteIfExists(file);
        }
    }

    private static List<String> hex(java.util.Collection<Long> v) { return v.stream().map(Long::toHexString).toList(); }
}
