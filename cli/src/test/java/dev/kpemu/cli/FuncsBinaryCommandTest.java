package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu funcs --binary PATH [GLOB]}: the user program of the uprobe recordings lists fact and
 * greet at the file offsets binutils gave record-uprobes-prog.sh (the recording's header, same
 * build); a file that is no ELF and a glob that matches nothing exit 2 with one line.
 */
class FuncsBinaryCommandTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void listsAProgramsFunctionsAtBinutilsOffsets(Arch arch, @TempDir Path tmp) throws Exception {
        Path prog = UprobeProgramBootTest.buildProgram(arch);
        String header = Files.readAllLines(NativeLibraries.repositoryRoot().resolve("guest-images/reference/" + arch.linuxName() + "/6.1/uprobes-prog.trace"))
                .stream().filter(l -> l.startsWith("# program: ")).findFirst().orElseThrow();
        Matcher h = Pattern.compile("sha256 ([0-9a-f]{16}); @FACT@ = (0x[0-9a-f]+) \\(fact\\), @GREET@ = (0x[0-9a-f]+) \\(greet\\)").matcher(header);
        assertTrue(h.find(), header);
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(prog))).substring(0, 16);
        Assumptions.assumeTrue(sha.equals(h.group(1)), "the recording's program is another build than this host's compiler made");

        CliTest.Run r = CliTest.run("funcs", "--binary", prog.toString(), "fac?");
        assertEquals(ExitCodes.OK, r.code(), r.err());
        assertEquals("fact\t" + h.group(2), r.out().strip());
        CliTest.Run g = CliTest.run("funcs", "--binary", prog.toString(), "greet");
        assertEquals(ExitCodes.OK, g.code(), g.err());
        assertEquals("greet\t" + h.group(3), g.out().strip());
        CliTest.Run all = CliTest.run("funcs", "--binary", prog.toString());
        assertEquals(ExitCodes.OK, all.code(), all.err());
        java.util.List<String> names = all.out().lines().map(l -> l.substring(0, l.indexOf('\t'))).toList();
        assertTrue(names.containsAll(java.util.List.of("fact", "greet", "main")), all.out());
        assertEquals(names.stream().sorted().toList(), names, "by name");

        CliTest.Run none = CliTest.run("funcs", "--binary", prog.toString(), "no_such_*");
        assertEquals(ExitCodes.USAGE, none.code());
        assertEquals("kpemu: no function of " + prog + " matches 'no_such_*'", none.err().strip());
        Path text = Files.writeString(tmp.resolve("script"), "#!/bin/sh\n");
        CliTest.Run notElf = CliTest.run("funcs", "--binary", text.toString());
        assertEquals(ExitCodes.USAGE, notElf.code());
        assertTrue(notElf.err().strip().startsWith("kpemu: " + text + ": not an ELF file kpemu can read ("), notElf.err());
        assertEquals(1, notElf.err().strip().lines().count(), notElf.err());
    }
}
