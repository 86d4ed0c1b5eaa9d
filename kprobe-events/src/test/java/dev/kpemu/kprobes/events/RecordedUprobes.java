package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Assumptions;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;

/**
 * The uprobe recording ({@code guest-images/record-uprobes.sh}: {@code reference/ARCH/SERIES/uprobes.trace})
 * of the kernel a test boots, and the recording's workload as kpemu's guest: three execs of busybox
 * between the markers kpemu's tests look for. A checkout without the reference, or a reference of
 * another build, skips the test.
 */
record RecordedUprobes(Arch arch, GuestImages images, String release, List<String> lines) {

    static RecordedUprobes forBootedKernel(Arch arch) throws IOException {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        GuestImages images = GuestImages.forRepository();
        String release = images.kernelVersion(arch).get("release");
        Path trace = ref.resolve(arch.linuxName()).resolve(ReferenceTrace.series(release)).resolve("uprobes.trace");
        Assumptions.assumeTrue(Files.isRegularFile(trace), "no uprobes.trace recorded for " + release);
        List<String> lines = Files.readAllLines(trace);
        Assumptions.assumeTrue(lines.stream().anyMatch(l -> l.startsWith("# kernel: " + release + " ")), "recorded on another build than " + release);
        return new RecordedUprobes(arch, images, release, List.copyOf(lines));
    }

    /** The recording as one text. */
    String text() {
        return String.join("\n", lines) + "\n";
    }

    /** The recording's workload; {@code mountProc}: /proc mounted first (init's own {@code mount} then runs before it). */
    Initramfs workloadGuest(boolean mountProc) throws IOException {
        String init = """
                #!/bin/sh
                export PATH=/bin
                %secho %s
                /bin/busybox true
                /bin/busybox true
                busybox true one two
                echo %s
                poweroff -f
                """.formatted(mountProc ? "mount -t proc proc /proc\n" : "", Initramfs.MARK_START, Initramfs.MARK_DONE);
        return Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch))).file("init", 0755, init);
    }
}
