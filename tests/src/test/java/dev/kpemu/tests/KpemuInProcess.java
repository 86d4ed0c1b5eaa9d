package dev.kpemu.tests;

import java.io.PrintWriter;
import java.io.StringWriter;

import picocli.CommandLine;

import dev.kpemu.cli.Main;

/** The kpemu command line run in the test's JVM, its exit code, stdout and stderr captured. */
final class KpemuInProcess {
    private KpemuInProcess() {}

    record Run(int code, String out, String err) {}

    static Run kpemu(String... args) {
        CommandLine cl = Main.commandLine();
        StringWriter out = new StringWriter(), err = new StringWriter();
        cl.setOut(new PrintWriter(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        return new Run(code, out.toString(), err.toString());
    }
}
