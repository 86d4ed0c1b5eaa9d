package dev.kpemu.kprobes.events;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.machine.Arch;

/**
 * Discovery ({@code kpemu funcs}, {@code kpemu vars}) on Debian's 6.12 and 7.x kernels, both
 * arches. {@code vars}: vfs_read's and fd_install's prototypes as fs/read_write.c and fs/file.c
 * declare them, written by hand (BTF drops {@code __user}), with the fetch types Linux's
 * {@code fetch_type_from_btf_type} gives them and the arch's argument registers. {@code funcs}:
 * {@code tcp_*} holds tcp_v4_connect (probe-able) and the {@code __init} tcp_init (refused: init
 * text is freed after boot); and every bare function Linux itself answered in the recorded
 * {@code dialect.error_log} is probe-able or refused exactly as Linux answered, with its reason.
 */
@Tag("kernel")
class DiscoveryTest {
    static Stream<Arguments> kernels() {
        return Stream.of("trixie", "sid").flatMap(s -> Stream.of(Arch.values()).map(a -> Arguments.of(s, a)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void varsOfVfsReadAndAVoidFunction(String suite, Arch a) throws Exception {
        var btf = BtfLocator.read(GuestImages.forRepository().kernel(a, RecordedKernels.choice(suite))).btf();
        FunctionVariables.Signature s = FunctionVariables.of(btf, a, "vfs_read").orElseThrow();
        assertEquals("ssize_t vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)", s.prototype());
        boolean x86 = a == Arch.X86_64;
        assertEquals(List.of(
                new FunctionVariables.Variable("file", "struct file *", "x64", "$arg1", x86 ? "%di" : "%x0", "->MEMBER (struct file)"),
                new FunctionVariables.Variable("buf", "char *", "x64", "$arg2", x86 ? "%si" : "%x1", ":string or :ustring (the text it points to)"),
                new FunctionVariables.Variable("count", "size_t", "u64", "$arg3", x86 ? "%dx" : "%x2", ""),
                new FunctionVariables.Variable("pos", "loff_t *", "x64", "$arg4", x86 ? "%cx" : "%x3", ""),
                new FunctionVariables.Variable("$retval", "ssize_t", "s64", null, x86 ? "%ax" : "%x0", "")), s.variables());

        FunctionVariables.Signature v = FunctionVariables.of(btf, a, "fd_install").orElseThrow();
        assertEquals("void fd_install(unsigned int fd, struct file *file)", v.prototype());
        assertEquals("u32", v.variables().getFirst().fetchType());
        FunctionVariables.Variable ret = v.variables().getLast();
        assertEquals(null, ret.fetchType());
        assertEquals("refused: This function returns 'void' type", ret.also());
        assertTrue(FunctionVariables.of(btf, a, "no_such_function_here").isEmpty());
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void funcsMarksWhatLinuxRefuses(String suite, Arch a) throws Exception {
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian choice = RecordedKernels.choice(suite);
        String release = images.kernelVersion(a, choice).get("release");
        Kallsyms.KernelText kt = Kallsyms.load(images.kernel(a, choice));
        KallsymsSymbols symbols = KallsymsSymbols.forKernel(kt.symbols(), a, kt.bytes());
        try (KernelProbeSites sites = new KernelProbeSites(a, kt.symbols(), kt.bytes()).dialect(Dialect.forRelease(release))) {
            Map<String, ProbeableFunctions.Function> tcp = ProbeableFunctions.list(a, kt.symbols(), symbols, sites, "tcp_*").stream()
                    .collect(Collectors.toMap(ProbeableFunctions.Function::name, f -> f));
            assertTrue(tcp.get("tcp_v4_connect").probeable(), "tcp_v4_connect: " + tcp.get("tcp_v4_connect"));
            assertEquals("Could not probe notrace function", tcp.get("tcp_init").refusal());
            assertTrue(tcp.keySet().stream().allMatch(n -> n.startsWith("tcp_")));
            assertFalse(ProbeableFunctions.list(a, kt.symbols(), symbols, sites, "vfs_read").getFirst().refusal() != null);

            Path ref = RecordedReferenceTest.reference();
            Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
            Path log = ref.resolve(a.linuxName()).resolve(ReferenceTrace.series(release)).resolve("dialect.error_log");
            Assumptions.assumeTrue(Files.isRegularFile(log), "no error_log recorded for " + release);
            List<String> wrong = new ArrayList<>();
            int compared = 0;
            for (RecordedErrorLog.Answer linux : RecordedErrorLog.read(log).answers()) {
                var m = java.util.regex.Pattern.compile("p:t\\d+ ([A-Za-z_]\\w*)").matcher(linux.definition());
                if (!m.matches() || kt.symbols().allByName(m.group(1)).size() != 1) continue;   // a bare, unique function
                List<ProbeableFunctions.Function> f = ProbeableFunctions.list(a, kt.symbols(), symbols, sites, m.group(1));
                String want = linux.accepted() ? null : !linux.console().isEmpty()
                        ? linux.console().getFirst().replaceFirst("^trace_kprobe: ", "").replaceAll(" [^ ]+$", "")
                        : linux.errorLog().getFirst().replaceFirst("^trace_kprobe: error: ", "");
                compared++;
                if (f.size() != 1 || !java.util.Objects.equals(want, f.getFirst().refusal()))
                    wrong.add(m.group(1) + ": Linux " + (want == null ? "takes it" : "refuses: " + want) + ", kpemu " + f);
            }
            assertTrue(compared >= 4, "recorded bare functions compared: " + compared);
            assertTrue(wrong.isEmpty(), String.join("\n", wrong));
        }
    }
}
