package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.events.TraceContext;
import dev.kpemu.kprobes.events.TraceRecord;

/** The text trace written on its own thread: every line, in order, complete once closed. */
class TraceLineWriterTest {
    @Test
    void writesEveryLineInOrderOnItsOwnThread() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        AtomicReference<Thread> writer = new AtomicReference<>();
        PrintStream out = new PrintStream(bytes, false, StandardCharsets.UTF_8) {
            @Override public void print(Object o) {
                writer.set(Thread.currentThread());
                super.print(o);
            }
        };
        int n = 3 * TraceLineWriter.CAPACITY + 17;     // more than the queue holds: the emulating side waits
        List<String> want = new ArrayList<>(n);
        try (TraceLineWriter w = TraceLineWriter.start(out)) {
            for (int i = 0; i < n; i++) {
                TraceRecord r = new TraceRecord("kprobes", "e", new TraceContext("cat", 90 + i % 3, 0, ".....", 1_000L * i),
                        "e: (vfs_read+0x0/0x10) n=" + i, false, 0x1000, 0);
                want.add(r.line());
                w.accept(r);
            }
        }
        List<String> got = bytes.toString(StandardCharsets.UTF_8).lines().toList();
        assertEquals(want.size(), got.size());
        assertEquals(want, got);
        assertNotEquals(Thread.currentThread(), writer.get(), "the lines were written by the writer's thread");
    }
}
