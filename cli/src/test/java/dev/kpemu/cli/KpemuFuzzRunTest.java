package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.machine.Arch;

/**
 * kpemu's side of a fuzz set whose definition kpemu refuses only when it registers it at /init:
 * x86_64 6.12, seed 13973155, set 131 held {@code p:c0 filldir64+184 ...}, which Linux under QEMU
 * refused ("trace_kprobe: error: Probe point is not an instruction boundary", its console) and
 * kpemu refused at registration too; the boot then stood at the registration point
 * (run_init_process) with the refusal noted by {@code TracedBoot} and nothing else, and the set
 * ended "GUEST_FAILED: stopped: Breakpoint[ffffffff81cb5e40]" (a kpemu defect class). The refusal
 * is a refusal: noted with its error_log line, and the set boots again without it.
 */
@Tag("kernel")
@Tag("scale")
class KpemuFuzzRunTest {
    static final String MID_INSTRUCTION = "p:c0 filldir64+184 a0=$COMM a1=@linux_banner:x8[6]";

    @Test
    void aDefinitionRefusedAtRegistrationIsNotedAndTheSetBootsWithoutIt(@TempDir Path dir) throws Exception {
        KernelChoice.Debian k = RecordedKernels.choice("trixie");
        GuestImages images = GuestImages.forRepository();
        Path kernel = images.kernel(Arch.X86_64, k);
        Path initramfs = CorpusGuest.archive(Files.readAllBytes(images.busybox(Arch.X86_64)), "kpemu", List.of()).write(dir.resolve("kpemu.cpio"));
        List<String> definitions = new ArrayList<>(List.of("p:corpus_mount path_mount type=+0(%dx):string",
                "p:corpus_exec bprm_execve file=+0(+96(%di)):string", MID_INSTRUCTION));
        FuzzRun r = KpemuFuzzRun.run(Arch.X86_64, kernel, k.toString(), initramfs, definitions, dir.resolve("set.events"), null);
        assertNull(r.failure(), r.toString());
        assertEquals(List.of(MID_INSTRUCTION), List.copyOf(r.refused().keySet()), r.toString());
        assertTrue(r.refused().get(MID_INSTRUCTION).contains("Probe point is not an instruction boundary"), r.toString());
        assertTrue(r.traceLines().stream().anyMatch(l -> l.contains("corpus_exec:")), r.toString());
    }
}
