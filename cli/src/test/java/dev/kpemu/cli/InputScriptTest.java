package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.boot.HostStop;

class InputScriptTest {
    @Test
    void writtenEntriesReadBackWithTheirBytesAndTimes(@TempDir Path tmp) throws Exception {
        Path f = tmp.resolve("in.jsonl");
        byte[] notUtf8 = {(byte) 0xff, 0x01};
        try (InputScript.Writer w = new InputScript.Writer(f)) {
            w.add(new InputScript.Entry(10_000_000, "echo hi\r".getBytes(StandardCharsets.UTF_8), false));
            w.add(new InputScript.Entry(20_000_000, notUtf8, false));
            w.add(new InputScript.Entry(30_000_000, new byte[0], true));
        }
        assertEquals(List.of("{\"guest_ns\":10000000,\"text\":\"echo hi\\r\"}", "{\"guest_ns\":20000000,\"base64\":\"/wE=\"}",
                "{\"guest_ns\":30000000,\"stop\":true}"), Files.readAllLines(f));
        List<InputScript.Entry> e = InputScript.read(f);
        assertEquals(3, e.size());
        assertEquals(10_000_000, e.get(0).guestNanos());
        assertArrayEquals("echo hi\r".getBytes(StandardCharsets.UTF_8), e.get(0).bytes());
        assertArrayEquals(notUtf8, e.get(1).bytes());
        assertTrue(e.get(2).stop());
    }

    @Test
    void malformedLinesAreOneLineErrorsNamingTheLine(@TempDir Path tmp) throws Exception {
        Path f = Files.writeString(tmp.resolve("bad.jsonl"), "{\"guest_ns\":5,\"text\":\"a\"}\n{\"text\":\"b\"}\n");
        var e = assertThrows(InputScript.MalformedInputException.class, () -> InputScript.read(f));
        assertEquals(f + ":2: needs \"guest_ns\" (guest time in nanoseconds)", e.getMessage());
        Path back = Files.writeString(tmp.resolve("back.jsonl"), "{\"guest_ns\":5,\"text\":\"a\"}\n{\"guest_ns\":4,\"text\":\"b\"}\n");
        assertThrows(InputScript.MalformedInputException.class, () -> InputScript.read(back));
        Path notJson = Files.writeString(tmp.resolve("x.jsonl"), "echo hi\n");
        assertTrue(assertThrows(InputScript.MalformedInputException.class, () -> InputScript.read(notJson)).getMessage()
                .startsWith(notJson + ":1: not a JSON object"));
    }

    @Test
    void replayDeliversEachEntryAtTheFirstPollAtOrAfterItsTime() {
        HostStop stop = new HostStop();
        ReplayedInput in = new ReplayedInput(List.of(new InputScript.Entry(15, "a".getBytes(), false),
                new InputScript.Entry(20, "b".getBytes(), false), new InputScript.Entry(40, new byte[0], true)), stop);
        assertEquals("", new String(in.take(10)));
        assertEquals("ab", new String(in.take(20)));
        assertEquals("", new String(in.take(30)));
        assertEquals(null, stop.reason());
        in.take(40);
        assertEquals("end of the recorded input", stop.reason());
    }
}
