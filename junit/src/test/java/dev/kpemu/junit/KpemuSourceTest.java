package dev.kpemu.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.machine.Arch;

/** {@link KpemuSource}'s invocations: every architecture with every kernel, each a session of its own (nothing boots here). */
class KpemuSourceTest {
    @KpemuSource(arch = {Arch.X86_64, Arch.ARM64}, kernel = {"debian:bookworm", "debian:trixie@6.12.117+deb13"}, command = {"true"})
    void annotated() {}

    @Test
    void oneSessionPerArchAndKernel() throws Exception {
        KpemuSessionsProvider p = new KpemuSessionsProvider();
        p.accept(getClass().getDeclaredMethod("annotated").getAnnotation(KpemuSource.class));
        List<? extends Arguments> args = p.provideArguments(null).toList();
        assertEquals(List.of("x86_64 debian:bookworm", "x86_64 debian:trixie@6.12.117+deb13",
                "arm64 debian:bookworm", "arm64 debian:trixie@6.12.117+deb13"),
                args.stream().map(a -> ((Named<?>) a.get()[0]).getName()).toList());
        for (Arguments a : args) {
            KpemuSession s = (KpemuSession) ((Named<?>) a.get()[0]).getPayload();
            assertEquals(((Named<?>) a.get()[0]).getName(), s.arch().linuxName() + " " + s.kernel());
        }
        assertEquals(4, args.stream().map(a -> ((Named<?>) a.get()[0]).getPayload()).distinct().count(), "a session each");
    }
}
