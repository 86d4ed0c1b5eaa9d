package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.machine.Arch;

/**
 * BTF arguments on the kernels that have them, and their refusal on the one that does not:
 * the {@code btfargs} script (parameter names, member access, {@code $arg*}, return-probe
 * {@code $argN}, typed {@code $retval}, strings through char pointers, symstr) gives exactly the
 * lines Linux printed under QEMU on Debian 13's 6.12 and unstable's 7.x, both arches; on Debian
 * 12's 6.1 the first definition is refused before the guest runs, with the errno, message and
 * caret (at its first argument) 6.1 itself gave a definition of the same form
 * ({@code p:b3 vfs_write count file->f_mode} in {@code dialect.error_log}).
 */
@Tag("kernel")
class BtfArgsTraceTest {
    static Stream<Arguments> btfKernels() {
        return Stream.of(System.getProperty("kpemu.btf.suites", "trixie,sid").split(",")).flatMap(s -> Stream.of(Arch.values()).map(a -> Arguments.of(s, a)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("btfKernels")
    void traceEqualsLinuxOwn(String suite, Arch arch) throws Exception {
        new KernelMatrixTest().traceEqualsLinuxOwn(suite, arch, "btfargs");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void linux61RefusesThemAsLinux61Does(Arch arch) throws Exception {
        Path events = KernelTraceRegressionTest.REFERENCE.resolve("btfargs." + arch.linuxName() + ".events");
        List<String> defs = Files.readAllLines(events).stream().filter(l -> !l.isBlank() && !l.startsWith("#")).toList();
        String first = defs.getFirst();
        assertTrue(first.startsWith("p:kprobes/w vfs_write file->f_mode "), "the script opens with a member access on vfs_write: " + first);
        TracedBoot traced = new TracedBoot(defs, null);
        TracedBoot.DefinitionRejected e = assertThrows(TracedBoot.DefinitionRejected.class, () -> BootRunner.boot(
                new BootRunner.Options(arch, KernelMatrixTest.kernel("bookworm", arch), null, null, 256, 60,
                        new ByteArrayOutputStream(), new PrintStream(new ByteArrayOutputStream())), traced));
        assertEquals(Dialect.LINUX_6_1, traced.dialect());

        Path recorded = KernelTraceRegressionTest.REFERENCE.resolve(arch.linuxName()).resolve("6.1").resolve("dialect.error_log");
        RecordedErrorLog.Answer linux = RecordedErrorLog.read(recorded).answers().stream()
                .filter(x -> x.definition().equals("p:b3 vfs_write count file->f_mode")).findFirst().orElseThrow();
        ProbeSyntaxException kpemu = e.error();
        assertEquals(linux.errno(), kpemu.errno());
        assertEquals(linux.errorLog().getFirst(), "trace_kprobe: error: " + kpemu.error().message());
        // the same caret, counted from the first argument (the event names differ in length)
        int linuxCaret = linux.errorLog().get(2).indexOf('^') - "  Command: ".length() - "p:b3 vfs_write ".length();
        assertEquals(linuxCaret, kpemu.position() - "p:kprobes/w vfs_write ".length());
        assertTrue(kpemu.command().startsWith(first), kpemu.command());
    }
}
