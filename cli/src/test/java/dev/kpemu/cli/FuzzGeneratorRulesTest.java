package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.machine.Arch;

/**
 * kpemu fuzz's own generator rules on Debian 12's kernel: the set of x86_64 seed 7301128, set 28
 * (generator seed 2074683581240271198) held {@code p:c1 alloc_super a0=+96(+296(%dx)):b2@25/64}, a
 * wall-clock {@code time64_t} (the keyring's {@code last_used_at}), which Linux under QEMU printed 1
 * and kpemu 3: the machines' clocks. With the fuzz rules no {@code time64_t} is fetched; without
 * them (the recorded corpus) the set is generated as before. The same for a function whose calls
 * follow the coarse clock (6.12's {@code mnt_put_write_access_file}).
 */
@Tag("kernel")
class FuzzGeneratorRulesTest {
    @Test
    void wallClockMembersAreLeftOutOfFuzzSets() throws Exception {
        List<String> survey = Files.readAllLines(FuzzClassifierTest.REFERENCE.resolve("corpus.survey"));
        KernelChoice k = KernelChoice.parse("debian:bookworm@6.1.0-56");
        String plain = CorpusGenerator.forKernel(Arch.X86_64, k, survey).generate(2074683581240271198L, 12);
        String fuzz = CorpusGenerator.forKernel(Arch.X86_64, k, survey).fuzzRules().generate(2074683581240271198L, 12);
        assertTrue(plain.contains("p:c1 alloc_super a0=+96(+296(%dx)):b2@25/64"), plain);
        assertFalse(fuzz.contains("+96(+296("), fuzz);
    }

    @Test
    void theCoarseClocksWriteAccessReleaseIsLeftOutOfFuzzSets() throws Exception {
        // x86_64 6.12, seed 7301130, set 52 (generator seed 464979966570795490): Linux under QEMU
        // fired "mnt_put_write_access_file+0x4 ... a1=file_update_time+0x6a/0x80" twice, kpemu once
        List<String> survey = Files.readAllLines(FuzzClassifierTest.REFERENCE.resolveSibling("6.12").resolve("corpus.survey"));
        KernelChoice k = KernelChoice.parse("debian:trixie@6.12.117+deb13");
        String plain = CorpusGenerator.forKernel(Arch.X86_64, k, survey).generate(464979966570795490L, 12);
        String fuzz = CorpusGenerator.forKernel(Arch.X86_64, k, survey).fuzzRules().generate(464979966570795490L, 12);
        assertTrue(plain.contains(" mnt_put_write_access_file "), plain);
        assertFalse(fuzz.contains("mnt_put_write_access"), fuzz);
        CorpusGenerator marked = CorpusGenerator.forKernel(Arch.X86_64, k, survey, true).fuzzRules();
        assertTrue(marked.leftOut().get("mnt_put_write_access_file").contains("FUZZ_MACHINE_PATHS"), marked.leftOut().toString());
    }

    @Test
    void aTasksIoCountersAreLeftOutOfFuzzSets() throws Exception {
        // arm64 6.1, seed 12799646, set 14 (generator seed -2577202835718216939) held
        // "p:c2 exit_files ... a2=+2272($arg1):s64": Linux 642, kpemu 641 for cat /proc/cmdline (the
        // QEMU command line ended in a blank), 1145 and 1055 for cat /proc/interrupts (each machine's)
        KernelChoice k = KernelChoice.parse("debian:bookworm@6.1.0-56");
        Btf btf = BtfLocator.read(GuestImages.forRepository().kernel(Arch.ARM64, k)).btf();
        Btf.Field ioac = btf.member("task_struct", "ioac").orElseThrow();
        assertEquals(2272, ioac.bitOffset() / 8, "task_struct.ioac in 6.1 arm64's BTF");
        assertEquals(2272, btf.offsetOf("task_struct", "ioac.rchar").bitOffset() / 8, "rchar first in task_io_accounting");
        assertTrue(CorpusGenerator.FUZZ_MACHINE_TYPES.matcher(btf.typeName(ioac.typeId())).find(), btf.typeName(ioac.typeId()));
        List<String> survey = Files.readAllLines(Path.of("..", "guest-images", "reference", "arm64", "6.1", "corpus.survey"));
        String fuzz = CorpusGenerator.forKernel(Arch.ARM64, k, survey).fuzzRules().generate(-2577202835718216939L, 12);
        assertFalse(fuzz.contains("+2272("), fuzz);
    }
}
