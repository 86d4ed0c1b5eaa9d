package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * Boots Debian's real kernel with probes and checks what probing does to it: unregistering mid-run
 * restores its text byte for byte. (Traces against Linux's own, kernel by kernel: {@link KernelMatrixTest}.)
 */
@Tag("kernel")
class KernelTraceRegressionTest {
    static final Path REFERENCE = NativeLibraries.repositoryRoot().resolve("guest-images/reference");

    record Run(BootRunner.Result result, TracedBoot traced, String console) {}

    static Run boot(Arch arch, List<String> definitions) throws Exception {
        TracedBoot traced = new TracedBoot(definitions, null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, console, null), traced);
        return new Run(r, traced, console.toString(StandardCharsets.ISO_8859_1));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void unregisteringMidRunRestoresTheText(Arch arch) throws Exception {
        String fn = "do_sys_openat2";
        List<String> defs = List.of("p:myopen " + fn + (arch == Arch.X86_64 ? " fn=+0(%si):ustring" : " fn=+0(%x1):ustring"),
                "r:myret " + fn + " ret=$retval");
        TracedBoot traced = new TracedBoot(defs, null);
        byte[][] text = new byte[3][];  // before registration, armed, after removal
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest g) { traced.ready(g); }

            @Override public boolean breakpoint(LinuxGuest g, long a) {
                long at = g.symbols().address(fn);
                boolean registered = traced.events() != null;
                if (!registered) text[0] = g.machine().readVirtual(at, 4);
                boolean go = traced.breakpoint(g, a);
                // the host breakpoints before registration (the arm point's entry) and after it
                // (init memory freed) need nothing more
                if (registered || traced.events() == null) return go;
                text[1] = g.machine().readVirtual(at, 4);
                // After the 4th event, remove every probe at the next safe point (between slices).
                traced.events().addListener(r -> {
                    if (traced.records().size() != 4) return;
                    g.machine().clock().schedule(g.machine().clock().liveNanos(), now -> {
                        traced.events().disableAll();
                        try {
                            traced.events().truncate();
                        } catch (ProbeSyntaxException e) {
                            throw new IllegalStateException(e);
                        }
                        text[2] = g.machine().readVirtual(at, 4);
                    });
                });
                return go;
            }
        };
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, console, null), hooks);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
        assertNotNull(text[2], "the probes were removed mid-run");
        byte[] breakpoint = arch == Arch.X86_64 ? new byte[] {(byte) 0xcc} : new byte[] {(byte) 0x80, 0x00, 0x20, (byte) 0xd4};
        assertArrayEquals(breakpoint, Arrays.copyOf(text[1], breakpoint.length), "armed: the breakpoint is in the text");
        assertArrayEquals(text[0], text[2], "after unregistering, the text is byte for byte what it was");
        assertEquals(4, traced.records().size(), "no event after the probes were removed");
    }
}
