package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.events.EventArg;
import dev.kpemu.kprobes.events.FetchType;
import dev.kpemu.kprobes.events.TraceContext;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * The JSON value of each fetch type as docs/json-trace.md specifies it (the types no kernel run
 * in JsonTraceTest produces: a u64 above 2^63, char, an array with a faulted string).
 */
class JsonTraceWriterTest {
    @Test
    void everyFetchTypeHasItsDocumentedJsonValue() {
        List<EventArg> args = List.of(
                new EventArg("big", FetchType.U64, 0, -1L, null),
                new EventArg("neg", FetchType.S16, 0, -2L, null),
                new EventArg("hex", FetchType.X32, 0, 0xffL, null),
                new EventArg("c", FetchType.CHAR, 0, (long) 'k', null),
                new EventArg("arr", FetchType.U8, 2, List.of(1L, 2L), null),
                new EventArg("strs", FetchType.STRING, 2, Arrays.asList("a", null), null),
                new EventArg("s", FetchType.USTRING, 0, null, null));
        TraceRecord r = new TraceRecord("kprobes", "e", new TraceContext("sh", 7, 0, "d....", 1_500_000_000L),
                "e: (f+0x4/0x10) big=18446744073709551615", false, 0xffffffff81000004L, 0, 2000, args);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (JsonTraceWriter w = new JsonTraceWriter(out)) {
            w.accept(r);
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        assertEquals("{\"event\":\"e\",\"group\":\"kprobes\",\"timestamp_ns\":1500000000,\"cpu\":0,\"pid\":7,\"comm\":\"sh\",\"flags\":\"d....\","
                + "\"probe\":{\"type\":\"kprobe\",\"ip\":\"0xffffffff81000004\",\"symbol\":\"f+0x4/0x10\"},"
                + "\"args\":{\"big\":18446744073709551615,\"neg\":-2,\"hex\":255,\"c\":\"k\",\"arr\":[1,2],\"strs\":[\"a\",null],\"s\":null},"
                + "\"faults\":[\"strs\",\"s\"]}\n", out.toString(StandardCharsets.UTF_8));
    }
}
