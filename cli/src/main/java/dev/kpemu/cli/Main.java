package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.List;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code kpemu} command. The launcher script {@code ./kpemu} builds the project and runs this. */
@Command(name = "kpemu",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        description = {"Full-system emulator on Unicorn that boots unmodified Linux kernels (x86-64, arm64)",
                "and probes them from outside the guest with a kprobes engine."},
        footer = {"", "Also: ./kpemu test   runs the whole test suite (the launcher runs Maven verify).",
                "", "Exit codes: 0 ok / guest powered off, 1 error, 2 usage or probe-definition error,",
                "3 guest panic or unhandled guest fault, 4 timeout, 5 the trace differs from the golden (compare, boot --expect)."})
public final class Main implements Runnable {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    /** {@code --cache DIR} (any command): kpemu's cache, as {@code -Dkpemu.cache} ({@link dev.kpemu.natives.NativeLibraries#cacheDirectory()}). */
    @CommandLine.Option(names = "--cache", paramLabel = "DIR", scope = CommandLine.ScopeType.INHERIT,
            description = "kpemu's cache: native engines, guest kernels and busybox, snapshots (default $KPEMU_CACHE, else $XDG_CACHE_HOME/kpemu or ~/.cache/kpemu; a checkout's .cache)")
    void cache(java.nio.file.Path dir) {
        System.setProperty("kpemu.cache", dir.toAbsolutePath().toString());
    }

    @Override public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    public static void main(String[] args) {
        dev.kpemu.boot.PhaseLog.mark("main");
        int code = execute(args);
        dev.kpemu.boot.PhaseLog.mark("exit");
        dev.kpemu.boot.PhaseLog.threads();
        System.exit(code);
    }

    /** Runs the command line and returns the exit code (never throws). */
    public static int execute(String... args) {
        CommandLine cl = commandLine(subcommandNamed(args));
        return cl.execute(args);
    }

    /**
     * kpemu's subcommands, in the order {@code kpemu --help} lists them. They are registered by
     * {@link #commandLine(Class)}, not in {@code @Command}: picocli reads a subcommand's
     * annotations when it is registered, and reading all of them took every run ~130 ms of CPU
     * ({@code -Dkpemu.phases}, "command line parsed").
     */
    static final List<Class<?>> SUBCOMMANDS = List.of(BootCommand.class, CompareCommand.class, ConvertCommand.class, DemoCommand.class,
            ImagesCommand.class, InitramfsCommand.class, CheckEventsCommand.class, FuncsCommand.class, FaultsCommand.class, VarsCommand.class,
            BenchCommand.class, CorpusCommand.class, FuzzCommand.class, CommandLine.HelpCommand.class);

    /**
     * The subcommand {@code args} run, when they name one before any other option than {@code
     * --cache}; null otherwise (no subcommand, a top-level option, {@code help}, a name kpemu does
     * not have: every subcommand is then registered, for the listing and picocli's suggestions).
     */
    static Class<?> subcommandNamed(String... args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--cache")) {
                i++;
                continue;
            }
            if (a.startsWith("--cache=")) continue;
            if (a.startsWith("-")) return null;
            for (Class<?> c : SUBCOMMANDS) {
                Command command = c.getAnnotation(Command.class);
                if (c != CommandLine.HelpCommand.class && command != null && command.name().equals(a)) return c;
            }
            return null;
        }
        return null;
    }

    /**
     * kpemu's standard output over {@code out}: it carries trace lines, the guest's bytes as
     * Linux's trace prints them, UTF-8 or not ({@link dev.kpemu.kprobes.events.GuestText#CHARSET}),
     * whatever the locale's encoding.
     */
    public static PrintWriter textOutput(java.io.OutputStream out) {
        return new PrintWriter(new java.io.OutputStreamWriter(out, dev.kpemu.kprobes.events.GuestText.CHARSET), true);
    }

    /** The command line with kpemu's error handlers (one line on stderr, the documented exit codes); for tests and embedding. */
    public static CommandLine commandLine() {
        return commandLine(null);
    }

    /** As {@link #commandLine()}, with only {@code only} of the subcommands; null: all of them. */
    static CommandLine commandLine(Class<?> only) {
        CommandLine cl = new CommandLine(new Main());
        for (Class<?> c : SUBCOMMANDS) if (only == null || c == only) cl.addSubcommand(c);
        cl.setOut(textOutput(System.out));
        cl.setErr(textOutput(System.err));      // diffs (compare, --expect) quote trace lines too
        cl.setParameterExceptionHandler((ex, args) -> {
            PrintWriter err = ex.getCommandLine().getErr();
            err.println("kpemu: " + ex.getMessage());
            err.println("Try '" + ex.getCommandLine().getCommandSpec().qualifiedName() + " --help' for more information.");
            return ExitCodes.USAGE;
        });
        cl.setExecutionExceptionHandler((ex, c, parseResult) -> {
            PrintWriter err = c.getErr();
            String msg = ex.getMessage() != null ? ex.getMessage() : ex.getClass().getSimpleName();
            err.println("kpemu: " + msg.lines().findFirst().orElse(msg));
            if (System.getenv("KPEMU_DEBUG") != null) ex.printStackTrace(err);
            return ExitCodes.ERROR;
        });
        return cl;
    }
}
