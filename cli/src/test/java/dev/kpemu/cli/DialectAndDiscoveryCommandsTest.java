package dev.kpemu.cli;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.natives.NativeLibraries;

/**
 * The commands around the booted kernel's language on Debian 13's 6.12 (cached kernel):
 * check-events speaks the kernel's own dialect (a BTF definition lists as Linux listed it,
 * recorded in dialect.error_log) unless {@code --dialect} forces another; funcs and vars answer,
 * and bad input is a one-line error with exit 2.
 */
@Tag("kernel")
class DialectAndDiscoveryCommandsTest {
    static final Path RECORDED = NativeLibraries.repositoryRoot().resolve("guest-images/reference/x86_64/6.12/dialect.error_log");
    /** The Debian 13 build the recorded error_log comes from. */
    static final String TRIXIE = RecordedKernels.choice("trixie").toString();

    @Test
    void checkEventsFollowsTheKernelAndDialectForcesOne() throws Exception {
        String linux = Files.readAllLines(RECORDED).stream().dropWhile(l -> !l.equals("> p:b1 vfs_read count pos"))
                .filter(l -> l.startsWith("= ")).findFirst().orElseThrow().substring(2);
        CliTest.Run ok = CliTest.run("check-events", "--kernel", TRIXIE, "-e", "p:b1 vfs_read count pos");
        assertEquals(0, ok.code(), ok.err());
        assertEquals(linux + "\n", ok.out());

        CliTest.Run old = CliTest.run("check-events", "--kernel", TRIXIE, "--dialect", "6.1", "-e", "p:b1 vfs_read count pos");
        assertEquals(ExitCodes.USAGE, old.code());
        assertTrue(old.err().startsWith("trace_kprobe: error: Invalid fetch argument"), old.err());

        CliTest.Run bad = CliTest.run("check-events", "--kernel", TRIXIE, "--dialect", "bsd", "-e", "p vfs_read");
        assertEquals(ExitCodes.USAGE, bad.code());
        assertTrue(bad.err().startsWith("kpemu: unknown dialect 'bsd'"), bad.err());
        assertTrue(bad.err().lines().noneMatch(l -> l.contains("Exception")), bad.err());
    }

    /**
     * A probe inside a site x86 rewrites while it boots (6.1's paravirt call at get_old_pud+178,
     * issue 32) is not refused from the file's text: Linux accepts it on its patched text
     * (reference/x86_64/6.1/patched.error_log); check-events says the running kernel decides.
     */
    @Test
    void aBootPatchedSiteIsLeftToTheRunningKernel() {
        CliTest.Run r = CliTest.run("check-events", "--kernel", RecordedKernels.choice("bookworm").toString(), "-e", "p get_old_pud+178");
        assertEquals(0, r.code(), r.err());
        assertEquals("p:kprobes/p_get_old_pud_178 get_old_pud+178", r.out().strip());
        assertTrue(r.err().contains("get_old_pud+178 is in a paravirt site the kernel rewrites while it boots"), r.err());
    }

    @Test
    void funcsAndVarsAnswerAndRefuseBadInput() {
        CliTest.Run f = CliTest.run("funcs", "--kernel", TRIXIE, "tcp_v4_connect");
        assertEquals(0, f.code(), f.err());
        assertEquals("tcp_v4_connect\n", f.out());
        CliTest.Run none = CliTest.run("funcs", "--kernel", TRIXIE, "no_such_function_*");
        assertEquals(ExitCodes.USAGE, none.code());
        assertEquals("kpemu: no function matches 'no_such_function_*'", none.err().strip().lines().reduce((a, b) -> b).orElse(""));

        CliTest.Run v = CliTest.run("vars", "--kernel", TRIXIE, "vfs_read");
        assertEquals(0, v.code(), v.err());
        assertTrue(v.out().startsWith("ssize_t vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)\n"), v.out());
        CliTest.Run nv = CliTest.run("vars", "--kernel", TRIXIE, "no_such_function_here");
        assertEquals(ExitCodes.USAGE, nv.code());
        assertTrue(nv.err().strip().endsWith("kpemu: the kernel's BTF has no function 'no_such_function_here'"), nv.err());
    }

    @Test
    void askingAgainReadsTheCachedIndexWithoutDecodingTheKernel() {
        // the first asks build the kernel's indexes when no earlier run did (once per kernel file)
        CliTest.Run all = CliTest.run("funcs", "--kernel", TRIXIE, "*tcp_v4_conn*");
        CliTest.Run vars = CliTest.run("vars", "--kernel", TRIXIE, "vfs_read");
        assertEquals(0, all.code(), all.err());
        int built = DiscoveryIndex.builds();

        CliTest.Run prefix = CliTest.run("funcs", "--kernel", TRIXIE, "tcp_v4_conn*");
        CliTest.Run again = CliTest.run("vars", "--kernel", TRIXIE, "vfs_read");
        assertEquals(built, DiscoveryIndex.builds(), "a cached answer decodes nothing of the kernel");
        assertTrue(!prefix.err().contains("indexing") && !again.err().contains("indexing"), prefix.err() + again.err());
        // the file of the names starting with 't' answers as the whole list does, in the same order
        assertEquals(all.out().lines().filter(l -> l.startsWith("tcp_v4_conn")).map(l -> l + "\n").reduce("", String::concat), prefix.out());
        assertTrue(prefix.out().lines().anyMatch("tcp_v4_connect"::equals), prefix.out());
        assertEquals(vars.out(), again.out());
        assertTrue(again.out().startsWith("ssize_t vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)\n"), again.out());
    }
}
