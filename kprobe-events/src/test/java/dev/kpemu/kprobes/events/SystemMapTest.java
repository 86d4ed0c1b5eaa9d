package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

/**
 * {@link SystemMap}: the data symbols a kernel's kallsyms lacks (Debian arm64's), used for
 * {@code w@SYM} only when the map agrees with the kernel on the text symbols both have; Debian's
 * one-line stub (the real file is in the -dbg package, as its line says) is refused.
 */
class SystemMapTest {
    static final long K = FakeKernel.KBASE;

    @Test
    void aMapThatAgreesGivesWprobesTheirDataSymbols() throws Exception {
        FakeKernel kallsyms = new FakeKernel();
        SystemMap map = SystemMap.parse("System.map", List.of(
                Long.toHexString(K + 0x1000) + " T vfs_read",
                Long.toHexString(K + 0x2000) + " T do_sys_openat2",
                Long.toHexString(K + 0x300040) + " D total_forks"));
        assertNull(map.mismatch(kallsyms));
        KernelSymbols withMap = new KernelSymbols() {
            @Override public int countSymbols(String name) { return kallsyms.countSymbols(name); }
            @Override public FuncEntry funcEntry(String s, long o) { return kallsyms.funcEntry(s, o); }
            @Override public OptionalLong lookupName(String name) { return kallsyms.lookupName(name); }
            @Override public OptionalLong lookupDataName(String name) {
                OptionalLong k = lookupName(name);
                return k.isPresent() ? k : map.address(name);
            }
            @Override public Optional<Symbol> symbolAt(long a) { return kallsyms.symbolAt(a); }
        };
        WprobeDef w = (WprobeDef) new ProbeParser(Arch.ARM64, Dialect.LINUX_6_1, withMap).parse("w:forks w@total_forks:8");
        assertEquals(K + 0x300040, w.address());
        assertEquals("w:wprobes/forks w@total_forks:8", w.listing());
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class,
                () -> new ProbeParser(Arch.ARM64, Dialect.LINUX_6_1, kallsyms).parse("w:forks w@total_forks:8"));
        assertEquals(KernelError.BAD_ACCESS_ADDR, e.error(), "without the map: kallsyms alone has no total_forks");
    }

    @Test
    void anotherKernelsMapAndDebiansStubAreRefused() {
        SystemMap other = SystemMap.parse("other.map", List.of(Long.toHexString(K + 0x1100) + " T vfs_read"));
        assertEquals("other.map is not the booted kernel's: vfs_read at 0x" + Long.toHexString(K + 0x1100)
                + " there, 0x" + Long.toHexString(K + 0x1000) + " in the kernel's kallsyms", other.mismatch(new FakeKernel()));
        IllegalArgumentException stub = assertThrows(IllegalArgumentException.class, () -> SystemMap.parse("System.map-7.2.13+deb14-arm64",
                List.of("ffffffffffffffff B The real System.map is in the linux-image-7.2.13+deb14-arm64-dbg package")));
        assertTrue(stub.getMessage().startsWith("System.map-7.2.13+deb14-arm64 is not a System.map"), stub.getMessage());
    }
}
