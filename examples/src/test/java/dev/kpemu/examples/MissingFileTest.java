package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kretprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;
import dev.kpemu.junit.KpemuSource;

/**
 * A JUnit test of kernel behaviour through the extension: every {@code openat} of a file that
 * does not exist returns -ENOENT (-2: include/uapi/asm-generic/errno-base.h; open(2): "ENOENT
 * O_CREAT is not set and the named file does not exist"), and busybox's {@code cat} then exits 1.
 */
@Tag("kernel")
class MissingFileTest {
    static final String MISSING = "/kpemu/no-such-file";
    static final long ENOENT = 2;

    @ParameterizedTest
    @KpemuSource(command = {"cat", MISSING}, timeoutSeconds = 30)
    void everyOpenOfAMissingFileReturnsEnoent(KpemuSession session) {
        List<Long> returns = new ArrayList<>();
        session.register(Kretprobe.on("do_sys_openat2")
                .entry(ctx -> ctx.setData(ctx.string(ctx.arg("filename")).orElse("(fault)")))
                .ret(ctx -> {
                    if (MISSING.equals(ctx.data())) returns.add(ctx.returnValue());
                }));
        SessionResult r = session.run();
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        assertEquals(1, r.commandExit(), r.commandOutput());
        assertFalse(returns.isEmpty(), "cat opened " + MISSING);
        for (long ret : returns) assertEquals(-ENOENT, ret);
    }
}
