package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The repository's recorded reference (guest-images/reference, Linux 6.1 under QEMU): its
 * definitions parse, and the same register/memory state formats to the kernel's own lines.
 */
class RecordedReferenceTest {
    static Path reference() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("guest-images/reference"))) p = p.getParent();
        return p == null ? null : p.resolve("guest-images/reference");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void openPathLinesMatchTheKernel(Arch a) throws Exception {
        Path ref = reference();
        org.junit.jupiter.api.Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        String name = a == Arch.X86_64 ? "x86_64" : "arm64";
        FakeKernel k = new FakeKernel();
        long openat2 = FakeKernel.KBASE + 0x10000, caller = FakeKernel.KBASE + 0x20000;
        k.replace("do_sys_openat2", openat2, a == Arch.X86_64 ? 0x170 : 0x190);
        String callerName = a == Arch.X86_64 ? "__x64_sys_openat" : "__arm64_sys_openat";
        k.replace(callerName, caller, a == Arch.X86_64 ? 0xa0 : 0xbc);
        ProbeParser parser = new ProbeParser(a, Dialect.LINUX_6_1, k);
        List<ProbeDefinition> defs = parser.parseAll(Files.readString(ref.resolve("open." + name + ".events")));
        assertEquals(2, defs.size());
        CompiledProbe open = CompiledProbe.compile((TraceProbe) defs.get(0), a, k);
        CompiledProbe ret = CompiledProbe.compile((TraceProbe) defs.get(1), a, k);
        TraceFormatter fmt = new TraceFormatter(k);

        RegisterSet rs = RegisterSet.of(a);
        // x86-64 passes the int dfd in edi (upper half zero); arm64's w0 is sign-extended by the caller
        k.regs[rs.argumentSlot(0)] = a == Arch.X86_64 ? 0xffffff9cL : -100L;
        k.regs[rs.argumentSlot(1)] = 0x7ffc0000L;
        k.putString(0x7ffc0000L, "/init");
        String l1 = fmt.kprobeEvent(open, openat2, open.fetch(k));
        k.regs[rs.returnValueSlot()] = 3;
        String l2 = fmt.kretprobeEvent(ret, openat2, caller + (a == Arch.X86_64 ? 0x6a : 0x70), ret.fetch(k));

        List<String> recorded = Files.readAllLines(ref.resolve(name + "/6.1/open.trace")).stream()
                .filter(l -> !l.startsWith("#") && !l.isBlank()).toList();
        assertEquals(recorded.get(0), l1);
        assertEquals(recorded.get(1), l2);
    }
}
