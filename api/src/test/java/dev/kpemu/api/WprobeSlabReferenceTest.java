package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;

/**
 * Issue 28: a slab object found at run time against Linux's own accesses recorded under QEMU's
 * gdbstub ({@code guest-images/record-watch-file.sh}: gdb stops at {@code do_filp_open}'s return
 * in cat, {@code awatch -l} on the returned file's {@code f_pos} until its {@code filp_close};
 * {@code reference/ARCH/6.1/watch-file-fpos.trace}). kpemu follows the same object with
 * {@code set_wprobe}/{@code clear_wprobe} triggers (as {@link WprobeTriggerSessionTest}): the
 * sequence of (instruction, value) pairs is gdb's, line for line. x86-64: the ip as gdb's pc (x86's
 * data breakpoints trap after the access), the value after it. arm64: gdb reports after the
 * access too (pc + 4, the value after), kpemu as the architecture's watchpoint exception, before
 * it: the accessing instruction (gdb's pc − 4) and the value before (a read's own, a write's the
 * line before's).
 */
@Tag("kernel")
class WprobeSlabReferenceTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void catsFilePositionAccessesAreLinuxs(Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/" + arch.linuxName() + "/6.1/watch-file-fpos.trace");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(images.kernelVersion(arch).toString().contains(refRelease),
                "the reference was recorded on " + refRelease);
        List<String> linux = new ArrayList<>();
        String before = null;
        for (String l : lines) {
            if (l.startsWith("W ") || l.startsWith("R ")) {
                String[] f = l.split(" ");
                if (arch == Arch.X86_64) linux.add(f[1] + " " + f[2]);
                else linux.add(Long.toHexString(Long.parseUnsignedLong(f[1], 16) - 4) + " " + (l.startsWith("R ") ? f[2] : before));
                before = f[2];
            }
        }
        assertTrue(linux.size() >= 2, "Linux accessed the file's f_pos: " + linux);

        long fpos = KernelStructs.forGuest(images, arch).btf().offsetOf("file", "f_pos").offset();
        SymbolTable symbols = images.symbols(arch);
        String firstArg = arch == Arch.X86_64 ? "%di" : "%x0";
        KpemuSession s = KpemuSession.builder().arch(arch).timeout(Duration.ofSeconds(60))
                .command("cat", "/proc/version")
                .events("r:open do_filp_open file=$retval:x64", "p:close filp_close file=" + firstArg + ":x64", "w:fpos rw@0:8 pos=+0($addr):s64")
                .build();
        List<String> errors = new ArrayList<>();
        s.onReady(r -> {
            try {
                r.events().addTrigger("open", "set_wprobe:fpos:file+" + fpos + " if comm == \"cat\"");
                r.events().addTrigger("close", "clear_wprobe:fpos:file+" + fpos);
            } catch (Exception e) {
                errors.add(e.toString());
            }
        });
        SessionResult r = s.run();
        assertEquals(List.of(), errors);
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        Pattern pos = Pattern.compile("^.* fpos: \\((\\w+)\\+0x([0-9a-f]+)/0x[0-9a-f]+\\) pos=(-?\\d+)$");
        List<String> kpemu = new ArrayList<>();
        for (String l : r.traceLines()) {
            Matcher m = pos.matcher(l);
            if (m.matches())
                kpemu.add(Long.toHexString(symbols.address(m.group(1)) + Long.parseLong(m.group(2), 16)) + " " + m.group(3));
        }
        assertEquals(linux, kpemu, "f_pos of cat's file: (ip, value) of each access");
    }
}
