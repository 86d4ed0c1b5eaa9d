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
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;

/**
 * The Java uprobe API on Debian 6.1 x86-64 against Linux's own uprobe events
 * ({@code reference/x86_64/6.1/uprobes.trace}, record-uprobes.sh): a {@link Uprobe} at busybox's
 * {@code _start} with the recording's {@code ustart} fetch arguments and a {@link Uretprobe} on
 * {@code true_main}, through the recording's workload (three execs of busybox). The handlers see,
 * at each workload hit, the address Linux printed, the argv strings and argc Linux fetched, the
 * stack pointer as a register equal to the {@code %sp} fetch, and {@code true_main}'s return
 * value and return address as Linux printed them.
 */
@Tag("kernel")
class UprobeSessionTest {
    private static final Pattern USTART = Pattern.compile(" ustart: \\((0x[0-9a-f]+)\\) arg1=\\S+ arg2=(0x[0-9a-f]+) arg3=\\S+ arg4=\"([^\"]*)\" arg5=\"([^\"]*)\"");
    private static final Pattern URET = Pattern.compile(" uret: \\((0x[0-9a-f]+) <- (0x[0-9a-f]+)\\) arg1=(0x[0-9a-f]+) ");
    private static final Pattern OFFSET = Pattern.compile("^#   p:ustart /bin/busybox:(0x[0-9a-f]+) ");
    private static final Pattern TRUE_OFFSET = Pattern.compile("^#   r:uret /bin/busybox:(0x[0-9a-f]+) ");

    @Test
    void handlersSeeWhatLinuxFetched() throws Exception {
        GuestImages images = GuestImages.forRepository();
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images").resolve("reference/x86_64/6.1/uprobes.trace");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(images.kernelVersion(Arch.X86_64).toString().contains(refRelease), "the reference was recorded on " + refRelease);
        long start = -1, trueMain = -1;
        List<String> linuxStarts = new ArrayList<>(), linuxReturns = new ArrayList<>();
        for (String l : lines) {
            Matcher m;
            if ((m = OFFSET.matcher(l)).find()) start = Long.decode(m.group(1));
            if ((m = TRUE_OFFSET.matcher(l)).find()) trueMain = Long.decode(m.group(1));
            if ((m = USTART.matcher(l)).find()) linuxStarts.add(m.group(1) + " argc=" + Long.decode(m.group(2)) + " " + m.group(3) + " " + m.group(4));
            if ((m = URET.matcher(l)).find()) linuxReturns.add(m.group(1) + " <- " + m.group(2) + " ret=" + Long.decode(m.group(3)));
        }
        assertTrue(start > 0 && trueMain > 0 && linuxStarts.size() == 3 && linuxReturns.size() == 3, "the recording: " + linuxStarts + linuxReturns);

        String init = """
                #!/bin/sh
                export PATH=/bin
                mount -t proc proc /proc
                echo %s
                /bin/busybox true
                /bin/busybox true
                busybox true one two
                echo %s
                poweroff -f
                """.formatted(Initramfs.MARK_START, Initramfs.MARK_DONE);
        Path initrd = Files.createTempFile("kpemu-uprobe-api", ".cpio");
        List<String> starts = new ArrayList<>(), returns = new ArrayList<>(), errors = new ArrayList<>();
        try {
            Initramfs.defaultGuest(Files.readAllBytes(images.busybox(Arch.X86_64))).file("init", 0755, init).write(initrd);
            Uprobe u = Uprobe.on("/bin/busybox", start).fetch("%sp", "$stack0", "+0(+8(%sp)):string", "+0(+16(%sp)):ustring")
                    .handler(h -> {
                        if (h.sp() != (Long) h.arg("arg1")) errors.add("rsp " + h.sp() + " is not %sp " + h.arg("arg1"));
                        if (h.reg("rip") != h.address()) errors.add("rip " + h.reg("rip") + " at " + h.address());
                        starts.add("0x" + Long.toHexString(h.address()) + " argc=" + h.arg("arg2") + " " + h.arg("arg3") + " " + h.arg("arg4"));
                    });
            Uretprobe r = Uretprobe.on("/bin/busybox", trueMain).fetch("$retval")
                    .handler(h -> returns.add("0x" + Long.toHexString(h.returnAddress()) + " <- 0x" + Long.toHexString(h.address())
                            + " ret=" + h.returnValue()));
            SessionResult result = KpemuSession.builder().arch(Arch.X86_64).timeout(Duration.ofSeconds(60)).initramfs(initrd)
                    .uprobe(u).uretprobe(r).build().run();
            assertEquals(Outcome.POWERED_OFF, result.outcome(), result.status());
            assertTrue(result.handlerFailures().isEmpty(), result.handlerFailures().toString());
            assertTrue(errors.isEmpty(), errors.toString());
            // kpemu's probes live from the registration point: init's shell and its mount start
            // busybox before the workload, poweroff after it (docs/uprobe-notes.md)
            assertEquals(linuxStarts.size() + 3, starts.size(), starts.toString());
            assertEquals(linuxStarts, starts.subList(2, 2 + linuxStarts.size()));
            assertEquals(linuxReturns, returns);
            assertEquals(starts.size(), u.hits());
        } finally {
            Files.deleteIfExists(initrd);
        }
    }

    /**
     * Linux's copy-on-write insertion leaves the page cache alone: a {@code read()} of a probed file
     * gets its bytes. kpemu writes nothing into the guest: the guest's md5sum of /bin/busybox while
     * a uprobe on its entry is registered (and hit by md5sum's own exec) is the host's md5 of the
     * same file.
     */
    @Test
    void theGuestReadsTheProbedFilesOriginalBytes() throws Exception {
        GuestImages images = GuestImages.forRepository();
        byte[] busybox = Files.readAllBytes(images.busybox(Arch.X86_64));
        dev.kpemu.image.ElfImage elf = dev.kpemu.image.ElfImage.parse(busybox, "busybox");
        long entry = -1;
        for (dev.kpemu.image.ElfImage.Segment seg : elf.loadSegments())
            if (seg.containsVaddr(elf.entry())) entry = elf.entry() - seg.vaddr() + seg.offset();
        assertTrue(entry > 0, "busybox's entry in a PT_LOAD segment");
        StringBuilder md5 = new StringBuilder();
        for (byte x : java.security.MessageDigest.getInstance("MD5").digest(busybox)) md5.append(String.format("%02x", x));
        Uprobe u = Uprobe.on("/bin/busybox", entry);
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        SessionResult result = KpemuSession.builder().arch(Arch.X86_64).timeout(Duration.ofSeconds(60))
                .command("sh", "-c", "/bin/busybox md5sum /bin/busybox").commandOutput(out).uprobe(u).build().run();
        assertEquals(Integer.valueOf(0), result.commandExit(), result.status() + " " + out);
        assertTrue(u.hits() >= 1, "md5sum's exec hit the probe");
        assertEquals(md5 + "  /bin/busybox", out.toString(java.nio.charset.StandardCharsets.UTF_8).strip());
    }
}
