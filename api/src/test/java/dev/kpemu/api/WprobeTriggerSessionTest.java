package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;

/**
 * wprobe triggers (linux-next's {@code set_wprobe}/{@code clear_wprobe}) on Debian's x86-64
 * kernel: a wprobe defined at address 0 is pointed by a kretprobe of {@code do_filp_open} at the
 * {@code f_pos} (its offset from the kernel's BTF) of the {@code struct file} cat opens, and
 * cleared by {@code filp_close} of that file: the wprobe sees cat's reads and writes of its file
 * position, which starts at 0 and ends at the number of bytes cat printed, and nothing once the
 * file is closed.
 */
@Tag("kernel")
class WprobeTriggerSessionTest {
    @Test
    void catsFilePositionFromOpenToClose() throws Exception {
        long fpos = KernelStructs.forGuest(GuestImages.forRepository(), Arch.X86_64).btf().offsetOf("file", "f_pos").offset();
        KpemuSession s = KpemuSession.builder().arch(Arch.X86_64).timeout(Duration.ofSeconds(60))
                .command("cat", "/proc/version")
                .events("r:open do_filp_open file=$retval:x64", "p:close filp_close file=%di:x64", "w:fpos rw@0:8 pos=+0($addr):s64")
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
        assertEquals(0, r.commandExit(), r.commandOutput());
        List<String> trace = r.traceLines();
        Pattern opened = Pattern.compile("^\\s*cat-\\d+ .* open: .* file=(0x[0-9a-f]+)$");
        Pattern pos = Pattern.compile("^\\s*(\\S+)-\\d+ .* fpos: \\((\\w+)\\+0x[0-9a-f]+/0x[0-9a-f]+\\) pos=(-?\\d+)$");
        String file = null;
        int openAt = -1, closeAt = -1;
        List<Long> positions = new ArrayList<>();
        for (int i = 0; i < trace.size(); i++) {
            String l = trace.get(i);
            Matcher o = opened.matcher(l);
            if (o.matches()) {
                file = o.group(1);
                openAt = i;
            }
            if (file != null && closeAt < 0 && l.contains(" close: ") && l.endsWith("file=" + file)) closeAt = i;
            Matcher p = pos.matcher(l);
            if (p.matches()) {
                assertTrue(openAt >= 0 && openAt < i && (closeAt < 0 || i < closeAt), "fpos records between cat's open and its close: " + l);
                assertEquals("cat", p.group(1), l);
                positions.add(Long.parseLong(p.group(3)));
            }
        }
        assertTrue(openAt >= 0 && closeAt > openAt, "cat opened and closed its file:\n" + String.join("\n", trace));
        assertTrue(positions.size() >= 2, "cat's reads and writes of f_pos: " + positions);
        assertEquals(0L, positions.getFirst(), "a new file starts at 0");
        assertEquals(r.commandOutput().length(), positions.getLast(), "and ends after what cat printed");
        for (int i = 1; i < positions.size(); i++) assertTrue(positions.get(i) >= positions.get(i - 1), "f_pos only grows: " + positions);
    }
}
