package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import picocli.CommandLine;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.cli.Main;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * Strings whose bytes are not UTF-8 (issue 32), against Linux's own trace of
 * {@code guest-images/reference/rawbytes.init} under QEMU ({@code record-reference.sh ARCH rawbytes}):
 * file names with a lone 0xff, an encoded surrogate, an overlong '/' and a cut sequence, read from
 * user memory, from the kernel's copy and through kernel fetches of the user address, an empty
 * name, and a comm that is not UTF-8. The trace prints the bytes themselves; so do kpemu's stdout,
 * {@code -o} and {@code --record} files, {@code --expect} compares them, and the JSON lines carry
 * them losslessly ({@code raw_comm}, {@code raw_args}).
 */
@Tag("kernel")
class RawBytesTraceTest {
    static final Path REFERENCE = KernelTraceRegressionTest.REFERENCE;

    /** The file name {@code /tmp/πx\xff} as the trace prints it, between quotes. */
    private static final byte[] PI_X_FF = {'"', '/', 't', 'm', 'p', '/', (byte) 0xcf, (byte) 0x80, 'x', (byte) 0xff, '"'};

    private static Path initramfs(Arch arch, Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, REFERENCE.resolve("rawbytes.init"), "init", arch);
        return archive.write(tmp.resolve("rawbytes.cpio"));
    }

    private static ReferenceTrace reference(String suite, Arch arch) throws Exception {
        Map<String, String> v = GuestImages.forRepository().kernelVersion(arch, RecordedKernels.choice(suite));
        Path ref = REFERENCE.resolve(arch.linuxName()).resolve(ReferenceTrace.series(v.get("release"))).resolve("rawbytes.trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no rawbytes reference recorded for " + v.get("release"));
        return ReferenceTrace.read(REFERENCE, arch, "rawbytes", v.get("release"));
    }

    /** The engine's trace equals Linux's, byte for byte in every string, on each kernel and arch. */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dev.kpemu.tests.KernelMatrixTest#kernels")
    void bytesTraceAsLinuxPrintsThem(String suite, Arch arch, @TempDir Path tmp) throws Exception {
        ReferenceTrace reference = reference(suite, arch);
        KernelChoice.Debian kernel = RecordedKernels.choice(suite);
        GuestImages images = GuestImages.forRepository();
        Map<String, String> v = images.kernelVersion(arch, kernel);
        TracedBoot traced = new TracedBoot(reference.definitions(), null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, images.kernel(arch, kernel), initramfs(arch, tmp), null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + console.toString(StandardCharsets.ISO_8859_1));
        List<String> lines = new ArrayList<>(traced.records().stream().map(TraceRecord::line).toList());
        TraceComparator.Result cmp = compareWorkload(reference, lines, v);
        assertTrue(cmp.matches(), suite + " " + arch + ": " + cmp.report());
        assertTrue(lines.stream().anyMatch(l -> l.contains("fn=\"/tmp/\u03c0x\udcff\"")), "the reference's bytes were compared: " + lines);
    }

    /**
     * Kernel fetches of a user address (issue 32's {@code p vma_merge a0=+40($arg3):string}) on
     * Debian 12's 6.1, against {@code reference/ARCH/6.1/kuser.trace}: both arches read user memory
     * there (CONFIG_ARCH_HAS_NON_OVERLAPPING_ADDRESS_SPACE, as {@code rawbytes} shows with the file
     * names), and the {@code (fault)} Linux prints is 6.1's empty user string
     * ({@code strncpy_from_user_nofault} returns 0 for it), for {@code :string} and
     * {@code :ustring} alike; the numeric and array fetches of the same address read 0.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void kernelFetchesOfUserAddressesAsLinux61(Arch arch) throws Exception {
        String suite = "bookworm";
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian kernel = RecordedKernels.choice(suite);
        Map<String, String> v = images.kernelVersion(arch, kernel);
        ReferenceTrace reference = ReferenceTrace.read(REFERENCE, arch, "kuser", v.get("release"));
        TracedBoot traced = new TracedBoot(reference.definitions(), null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, images.kernel(arch, kernel), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
        List<String> lines = new ArrayList<>(traced.records().stream().map(TraceRecord::line).toList());
        TraceComparator.Result cmp = TraceComparator.compare(reference, lines, v.get("release"), v.get("version"));
        assertTrue(cmp.matches(), arch + ": " + cmp.report());
        assertTrue(lines.stream().anyMatch(l -> l.contains(" vstr: ") && l.endsWith("a0=(fault)")), "the case of the issue: " + lines);
    }

    /**
     * The workload's events compared: from the first open by a process (the shell opening /init)
     * on. Before it, {@code kcopy} shows the kernel's own file opens while it boots — its
     * {@code /sbin/modprobe} requests, /dev/console, /init — which follow the machine's devices,
     * not the workload (recorded: QEMU's arm64 6.12 boot asks for two modules more than kpemu's
     * board does).
     */
    private static TraceComparator.Result compareWorkload(ReferenceTrace reference, List<String> lines, Map<String, String> v) {
        List<ReferenceTrace.Event> expected = workload(reference.events()), actual = workload(reference.eventsOf(lines));
        assertTrue(expected.size() >= 40, "the workload's events: " + expected.size());
        return TraceComparator.compareEvents(expected, actual, TraceComparator.mode(reference, v.get("release"), v.get("version")));
    }

    private static List<ReferenceTrace.Event> workload(List<ReferenceTrace.Event> events) {
        int first = 0;
        while (first < events.size() && events.get(first).name().equals("kcopy")) first++;
        return events.subList(first, events.size());
    }

    private record Cli(int code, byte[] out, String err) {}

    /** {@code kpemu ARGS} in this JVM, stdout through the writer {@link Main} gives the process's stdout. */
    private static Cli kpemu(String... args) {
        CommandLine cl = Main.commandLine();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        StringWriter err = new StringWriter();
        cl.setOut(Main.textOutput(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        cl.getOut().flush();
        return new Cli(code, out.toByteArray(), err.toString());
    }

    private static boolean contains(byte[] hay, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= hay.length; i++) {
            for (int j = 0; j < needle.length; j++) if (hay[i + j] != needle[j]) continue outer;
            return true;
        }
        return false;
    }

    private static List<String> lines(byte[] text) {
        return GuestText.decode(text).lines().toList();
    }

    /**
     * The command line's outputs on Debian 12's kernel: stdout and {@code -o} hold Linux's bytes
     * (and compare equal to Linux's trace), a {@code --record} golden holds them and
     * {@code --expect} passes against it, and {@code --format json} gives them back exactly from
     * its strings and {@code raw_comm}/{@code raw_args}.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyOutputCarriesTheBytes(Arch arch, @TempDir Path tmp) throws Exception {
        String suite = "bookworm";
        ReferenceTrace reference = reference(suite, arch);
        Map<String, String> v = GuestImages.forRepository().kernelVersion(arch, RecordedKernels.choice(suite));
        Path initrd = initramfs(arch, tmp);
        Path events = REFERENCE.resolve("rawbytes." + arch.linuxName() + ".events");
        String kernel = "debian:" + suite + "@" + RecordedKernels.releases().get(suite);
        List<String> boot = List.of("boot", "--arch", arch.linuxName(), "--kernel", kernel, "--initrd", initrd.toString(),
                "--events-file", events.toString());

        // stdout
        Cli std = kpemu(boot.toArray(String[]::new));
        assertEquals(0, std.code(), std.err());
        assertTrue(contains(std.out(), PI_X_FF), "stdout holds the bytes 0xcf 0x80 'x' 0xff");
        TraceComparator.Result cmp = compareWorkload(reference, lines(std.out()), v);
        assertTrue(cmp.matches(), "stdout: " + cmp.report());

        // -o and --record in one run; --expect against the golden
        Path out = tmp.resolve("trace.txt"), golden = tmp.resolve("golden.trace");
        List<String> args = new ArrayList<>(boot);
        args.addAll(List.of("-o", out.toString(), "--record", golden.toString()));
        Cli rec = kpemu(args.toArray(String[]::new));
        assertEquals(0, rec.code(), rec.err());
        byte[] file = Files.readAllBytes(out);
        assertTrue(contains(file, PI_X_FF), "-o holds the bytes");
        assertTrue(contains(Files.readAllBytes(golden), PI_X_FF), "the golden holds the bytes");
        cmp = compareWorkload(reference, lines(file), v);
        assertTrue(cmp.matches(), "-o: " + cmp.report());
        assertTrue(TraceComparator.compare(ReferenceTrace.read(golden, arch), lines(file), v.get("release"), v.get("version")).matches(),
                "the golden read back is the -o trace");
        args = new ArrayList<>(boot);
        args.addAll(List.of("-o", tmp.resolve("again.txt").toString(), "--expect", golden.toString()));
        Cli expect = kpemu(args.toArray(String[]::new));
        assertEquals(0, expect.code(), "--expect against the golden it recorded: " + expect.err());
        Cli compare = kpemu("compare", golden.toString(), golden.toString());
        assertEquals(0, compare.code(), compare.err());

        // JSON: each string, with its raw bytes where it has them, is the trace's text
        Path json = tmp.resolve("trace.jsonl");
        args = new ArrayList<>(boot);
        args.addAll(List.of("--format", "json", "-o", json.toString()));
        Cli js = kpemu(args.toArray(String[]::new));
        assertEquals(0, js.code(), js.err());
        List<String> texts = lines(file);
        ObjectMapper mapper = new ObjectMapper();
        List<String> jsonLines = Files.readAllLines(json, StandardCharsets.UTF_8);   // strict: valid UTF-8
        assertEquals(texts.size(), jsonLines.size());
        int raw = 0;
        for (int i = 0; i < texts.size(); i++) {
            JsonNode e = mapper.readTree(jsonLines.get(i));
            String text = texts.get(i);
            byte[] comm = e.has("raw_comm") ? Base64.getDecoder().decode(e.get("raw_comm").asText())
                    : e.get("comm").asText().getBytes(StandardCharsets.UTF_8);
            String task = text.substring(0, text.indexOf(" [")).strip();
            assertArrayEquals(GuestText.encode(task.substring(0, task.lastIndexOf('-'))), comm, text);
            var it = e.get("args").properties().iterator();
            while (it.hasNext()) {
                var a = it.next();
                if (!a.getValue().isTextual()) continue;
                JsonNode rawArg = e.path("raw_args").get(a.getKey());
                byte[] bytes = rawArg != null ? Base64.getDecoder().decode(rawArg.asText()) : a.getValue().asText().getBytes(StandardCharsets.UTF_8);
                if (rawArg != null) raw++;
                String printed = " " + a.getKey() + "=\"" + GuestText.decode(bytes) + "\"";
                assertTrue(text.contains(printed), text + " has " + printed);
            }
        }
        assertTrue(raw >= 6, "the names that are not UTF-8 came with their bytes: " + raw);
    }
}
