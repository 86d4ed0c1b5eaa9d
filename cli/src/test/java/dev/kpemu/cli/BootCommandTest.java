package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BootCommandTest {
    @Test
    void badArgumentsAreUsageErrors() {
        assertEquals(ExitCodes.USAGE, CliTest.run("boot").code(), "--arch is required");
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "sparc").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "arm64", "--memory", "16").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "arm64", "--timeout", "0").code());
    }

    @Test
    void missingKernelIsAnError(@TempDir Path tmp) {
        CliTest.Run r = CliTest.run("boot", "--arch", "arm64", "--kernel", tmp.resolve("nope").toString(),
                "--initrd", tmp.resolve("nope2").toString());
        assertEquals(ExitCodes.ERROR, r.code(), r.out() + r.err());
        assertTrue(r.err().startsWith("kpemu: "), r.err());
    }

    @Test
    @Tag("kernel")
    void arm64BootsToPowerOff(@TempDir Path tmp) throws Exception {
        Path console = tmp.resolve("console.txt");
        CliTest.Run r = CliTest.run("boot", "--arch", "arm64", "--console", console.toString());
        String con = Files.readString(console, StandardCharsets.ISO_8859_1);
        assertEquals(ExitCodes.OK, r.code(), r.out() + "\n" + con);
        assertTrue(con.contains("KPEMU-INIT-DONE"), con);
        assertTrue(r.out().contains("guest powered off"), r.out());
    }
}
