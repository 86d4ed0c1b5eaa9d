package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.io.PrintWriter;
import java.io.StringWriter;

import org.junit.jupiter.api.Test;

import picocli.CommandLine;


class CliTest {
    record Run(int code, String out, String err) {}

    static Run run(String... args) {
        return run(Main.commandLine(), args);
    }

    private static Run run(CommandLine cl, String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        cl.setOut(new PrintWriter(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void helpListsSubcommands() {
        Run r = run("--help");
        assertEquals(0, r.code());
        for (String sub : new String[] {"demo", "boot", "images", "check-events", "bench"}) assertTrue(r.out().contains("  " + sub + " "), r.out());
    }

    /** Every subcommand's help renders without picocli warnings (an unescaped % in a description). */
    @Test
    void subcommandHelpHasNoFormatWarnings() {
        java.io.PrintStream saved = System.err;
        java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
        System.setErr(new java.io.PrintStream(captured, true, java.nio.charset.StandardCharsets.UTF_8));
        try {
            for (String sub : new String[] {"demo", "boot", "images", "check-events", "bench", "faults"}) {
                Run r = run(sub, "--help");
                assertEquals(0, r.code(), sub);
                assertTrue(r.out().contains("Usage: kpemu " + sub), r.out());
            }
        } finally {
            System.setErr(saved);
        }
        String warnings = captured.toString(java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(!warnings.contains("WARN"), warnings);
    }

    /** As {@link Main#execute} runs a command line: only the subcommand it names is registered. */
    static Run runAsMain(String... args) {
        return run(Main.commandLine(Main.subcommandNamed(args)), args);
    }

    @Test
    void theNamedSubcommandAloneIsRegistered() {
        assertEquals(BootCommand.class, Main.subcommandNamed("boot", "--arch", "arm64"));
        assertEquals(BootCommand.class, Main.subcommandNamed("--cache", "/tmp/c", "boot"));
        assertEquals(BootCommand.class, Main.subcommandNamed("--cache=/tmp/c", "boot"));
        assertEquals(CheckEventsCommand.class, Main.subcommandNamed("check-events", "x"));
        assertEquals(null, Main.subcommandNamed());
        assertEquals(null, Main.subcommandNamed("--help"));
        assertEquals(null, Main.subcommandNamed("help", "boot"));
        assertEquals(null, Main.subcommandNamed("frobnicate"));
        assertEquals(List.of("boot"), List.copyOf(Main.commandLine(BootCommand.class).getSubcommands().keySet()));
        assertEquals(Main.SUBCOMMANDS.size(), Main.commandLine().getSubcommands().size());

        Run boot = runAsMain("boot", "--help");
        assertEquals(0, boot.code());
        assertTrue(boot.out().startsWith("Usage: kpemu boot"), boot.out());
        Run all = runAsMain("--help");
        assertEquals(0, all.code());
        for (String sub : new String[] {"demo", "boot", "images", "check-events", "bench", "fuzz", "help"}) assertTrue(all.out().contains("  " + sub + " "), all.out());
        Run help = runAsMain("help", "funcs");
        assertEquals(0, help.code());
        assertTrue(help.out().startsWith("Usage: kpemu funcs"), help.out());
        Run unknown = runAsMain("boots");
        assertEquals(ExitCodes.USAGE, unknown.code());
        assertTrue(unknown.err().contains("boot"), "picocli's suggestion names the subcommands: " + unknown.err());
        Run badOption = runAsMain("boot", "--no-such-option");
        assertEquals(ExitCodes.USAGE, badOption.code());
        assertTrue(badOption.err().startsWith("kpemu: "), badOption.err());
    }

    @Test
    void unknownSubcommandIsUsageError() {
        Run r = run("frobnicate");
        assertEquals(ExitCodes.USAGE, r.code());
        assertTrue(r.err().startsWith("kpemu: "), r.err());
        assertEquals(2, r.err().lines().count(), "one-line error plus a hint, no stack trace: " + r.err());
    }

    @Test
    void badBenchArgumentsAreUsageErrors() {
        assertEquals(ExitCodes.USAGE, run("bench", "nothing").code());
        assertEquals(ExitCodes.USAGE, run("bench", "unicorn", "--arch", "sparc").code());
        for (String[] args : new String[][] {{"bench", "guest", "--benchmarks", "nope"}, {"bench", "guest", "--iterations", "nope=5"},
                {"bench", "guest", "--iterations", "syscall=0"}, {"bench", "guest", "--repeat", "0"}}) {
            Run r = run(args);
            assertEquals(ExitCodes.USAGE, r.code(), String.join(" ", args) + ": " + r.err());
            assertTrue(!r.err().contains("Exception"), r.err());
        }
        assertTrue(run("bench", "guest", "--benchmarks", "nope").err().contains("unknown guest benchmark 'nope' (syscall, fault, yield, forkexec, pipe, fs, busybox)"));
    }

    @Test
    void benchUnicornPrintsEachOperationPerArch() {
        Run r = run("bench", "unicorn", "--batches", "3", "--per-batch", "200");
        assertEquals(0, r.code(), r.err());
        String[] operations = {"interrupt-hook round trip (trap, empty hook, continue)", "interrupt-hook round trip, the hook writing pc",
                "register read (pc)", "batch read of 22 registers (one call)", "one-instruction step (count=1) + pc read", "stop in hook + restart"};
        for (String arch : new String[] {"x86_64", "arm64"}) {
            List<String> rows = r.out().lines().filter(l -> l.startsWith(arch + " ")).toList();
            assertEquals(operations.length, rows.size(), r.out());
            for (int i = 0; i < operations.length; i++) {
                assertTrue(rows.get(i).contains(operations[i]) && rows.get(i).matches(".*\\d+\\.\\d{3}\\s*$"), rows.get(i));
            }
        }
    }

    @Test
    void checkEventsPrintsErrorLogWithCaretAndExitsTwo() {
        Run r = run("check-events", "--syntax-only", "-e", "p:ok do_sys_openat2 dfd=%di", "-e", "p:bad do_sys_openat2 x=%xx");
        assertEquals(ExitCodes.USAGE, r.code());
        assertEquals("p:kprobes/ok do_sys_openat2 dfd=%di", r.out().strip());
        // caret under the '%' that starts the bad register, as the kernel's error_log puts it
        assertEquals("""
                trace_kprobe: error: Invalid register name
                  Command: p:bad do_sys_openat2 x=%xx
                                                  ^
                """, r.err().stripTrailing() + "\n");
    }

    @Test
    void checkEventsAgainstRealKallsyms() {
        Run ok = run("check-events", "--arch", "arm64", "-e", "p:myopen do_sys_openat2 dfd=%x0 fn=+0(%x1):ustring");
        assertEquals(0, ok.code(), ok.err());
        Run missing = run("check-events", "--arch", "arm64", "-e", "p no_such_function_in_this_kernel");
        assertEquals(ExitCodes.USAGE, missing.code());
        assertTrue(missing.err().startsWith("trace_kprobe: error: Invalid probed address or symbol"), missing.err());
        Run notEntry = run("check-events", "--arch", "x86_64", "-e", "r do_sys_openat2+4");
        assertTrue(notEntry.err().contains("Retprobe address must be an function entry"), notEntry.err());
    }

    @Test
    void unknownDebianSuiteIsUsageError() {
        for (String[] args : new String[][] {{"images", "--kernel", "debian:jessie"}, {"boot", "--arch", "x86_64", "--kernel", "debian:jessie"},
                {"demo", "--kernel", "debian:jessie"}, {"check-events", "--kernel", "debian:jessie", "-e", "p:x do_sys_openat2"}}) {
            Run r = run(args);
            assertEquals(ExitCodes.USAGE, r.code(), String.join(" ", args) + ": " + r.err());
            assertTrue(r.err().startsWith("kpemu: unknown Debian suite 'jessie'"), r.err());
            assertEquals(2, r.err().lines().count(), "one-line error plus a hint: " + r.err());
        }
    }

    @Test
    void kernelFileChoicesNeedOneArch() {
        Run r = run("demo", "--kernel", "/nonexistent/bzImage");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertTrue(r.err().contains("needs --arch"), r.err());
        r = run("images", "--kernel", "/nonexistent/bzImage");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
    }

    @Test
    void snapshotOptionsThatCannotGoTogetherAreUsageErrors() throws Exception {
        java.nio.file.Path input = java.nio.file.Files.createTempFile("kpemu-input", ".txt");
        try {
            java.nio.file.Files.writeString(input, "");
            for (String[] args : new String[][] {{"boot", "--arch", "x86_64", "--snapshot", "--snapshot-file", "/tmp/x.snapshot"},
                    {"boot", "--arch", "x86_64", "--snapshot", "--input", input.toString(), "--", "true"}}) {
                Run r = run(args);
                assertEquals(ExitCodes.USAGE, r.code(), String.join(" ", args) + ": " + r.err());
                assertTrue(r.err().lines().findFirst().orElse("").contains("--snapshot"), r.err());
            }
        } finally {
            java.nio.file.Files.deleteIfExists(input);
        }
    }
}
