package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.machine.Arch;

/**
 * The Perfetto JSON of a small hand-made trace: tracks, instants, the kretprobe pairing (LIFO per
 * task and function) and the durations, all written by hand, checked against the Trace Event
 * Format's fields.
 */
class PerfettoTraceTest {
    static final List<String> DEFS = List.of(
            "p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring",
            "r:myret do_sys_openat2 ret=$retval",
            "p:rd ksys_read fd=%di",
            "r:rdret ksys_read ret=$retval",
            "p:mid ksys_read+5");

    // sh-80 opens twice, nested as recursion would (LIFO); cat-82 opens once on cpu 1 and returns on cpu 2; rd has a return with no entry seen
    static final List<String> LINES = List.of(
            "              sh-80      [000] .....     1.000100: myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn=\"/a\"",
            "              sh-80      [000] .....     1.000150: myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn=\"/b\"",
            "             cat-82      [001] .....     1.000160: myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn=\"/c\"",
            "              sh-80      [000] .....     1.000170: myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x4",
            "             cat-82      [002] .....     1.000200: myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3",
            "              sh-80      [000] .....     1.000400: myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3",
            "             cat-82      [000] .....     1.000500: mid: (ksys_read+0x5/0xe0)",
            "             cat-82      [000] .....     1.000510: rdret: (vfs_read+0x10/0x30 <- ksys_read) ret=0x0");

    static RecordedTrace trace() {
        RecordedTrace.Header h = new RecordedTrace.Header(Arch.X86_64, "6.1.0-56-amd64", "linux-image-6.1.0-56-amd64", "6.1.192-2",
                "vmlinuz", null, null, "0.1.0-SNAPSHOT", "console=ttyS0 nokaslr", null, null, "init_kprobe_trace", null, DEFS,
                List.of(new RecordedTrace.Phase("boot", 0, 900_000_000L), new RecordedTrace.Phase("init", 900_000_000L, 1_200_000_000L)));
        return RecordedTrace.of(h, LINES, "hand");
    }

    @Test
    void tracksInstantsSlicesAndPhases() throws Exception {
        PerfettoTrace p = PerfettoTrace.of(trace());
        assertEquals(new PerfettoTrace.Counts(2, 5, 3, 2), p.counts());
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        p.write(bytes);
        JsonNode root = new ObjectMapper().readTree(bytes.toByteArray());
        assertTrue(root.get("traceEvents").isArray());
        assertEquals("ns", root.get("displayTimeUnit").asText());
        List<JsonNode> ev = new ArrayList<>();
        root.get("traceEvents").forEach(ev::add);
        for (JsonNode e : ev) {
            // every event has the documented fields: name, ph, pid; ts (microseconds) except metadata
            assertTrue(e.hasNonNull("name") && e.hasNonNull("ph") && e.get("pid").isInt(), e.toString());
            String ph = e.get("ph").asText();
            assertTrue(List.of("M", "i", "X").contains(ph), e.toString());
            if (!ph.equals("M")) assertTrue(e.get("ts").isIntegralNumber() && e.get("tid").isInt(), e.toString());
            if (ph.equals("X")) assertTrue(e.get("dur").isIntegralNumber() && e.get("dur").asLong() >= 0, e.toString());
            if (ph.equals("i")) assertEquals("t", e.get("s").asText(), e.toString());
        }
        // tracks: thread_name metadata per task
        List<String> threads = ev.stream().filter(e -> e.get("name").asText().equals("thread_name") && e.get("pid").asInt() == 1)
                .map(e -> e.get("tid").asInt() + "=" + e.get("args").get("name").asText()).toList();
        assertEquals(List.of("80=sh-80", "82=cat-82"), threads);
        // slices: durations by hand: sh /b 150..170 = 20 us (inner, LIFO), cat 160..200 = 40, sh /a 100..400 = 300
        List<String> slices = ev.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("pid").asInt() == 1)
                .map(e -> e.get("tid").asInt() + " " + e.get("name").asText() + " " + e.get("ts").asLong() + "+" + e.get("dur").asLong()
                        + " " + e.get("args").get("myopen.fn").asText() + " " + e.get("args").get("myret.ret").asText())
                .toList();
        assertEquals(List.of("80 do_sys_openat2 1000150+20 \"/b\" 0x4", "82 do_sys_openat2 1000160+40 \"/c\" 0x3",
                "80 do_sys_openat2 1000100+300 \"/a\" 0x3"), slices);
        // instants: every kprobe event, and the return that had no entry (rdret: ksys_read+5 is no entry)
        List<String> instants = ev.stream().filter(e -> e.get("ph").asText().equals("i") && e.get("pid").asInt() == 1)
                .map(e -> e.get("tid").asInt() + " " + e.get("name").asText() + " " + e.get("ts").asLong() + " " + e.get("args").get("probe").asText())
                .toList();
        assertEquals(List.of("80 myopen 1000100 do_sys_openat2+0x0/0x170", "80 myopen 1000150 do_sys_openat2+0x0/0x170",
                "82 myopen 1000160 do_sys_openat2+0x0/0x170", "82 mid 1000500 ksys_read+0x5/0xe0",
                "82 rdret 1000510 vfs_read+0x10/0x30 <- ksys_read"), instants);
        assertEquals("\"/a\"", ev.stream().filter(e -> e.get("ph").asText().equals("i") && e.get("pid").asInt() == 1).findFirst().orElseThrow().get("args").get("fn").asText());
        // the cpu column: an instant's cpu, a slice's entry and return cpus
        assertEquals(List.of(0, 0, 1, 0, 0), ev.stream().filter(e -> e.get("ph").asText().equals("i") && e.get("pid").asInt() == 1).map(e -> e.get("args").get("cpu").asInt()).toList());
        assertEquals(List.of("0>0", "1>2", "0>0"), ev.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("pid").asInt() == 1)
                .map(e -> e.get("args").get("entry cpu").asInt() + ">" + e.get("args").get("return cpu").asInt()).toList());
        // every event again on its CPU's track (process 3), named cpu N
        assertEquals(List.of("0 myopen 1000100 sh-80", "0 myopen 1000150 sh-80", "1 myopen 1000160 cat-82", "0 myret 1000170 sh-80",
                "2 myret 1000200 cat-82", "0 myret 1000400 sh-80", "0 mid 1000500 cat-82", "0 rdret 1000510 cat-82"),
                ev.stream().filter(e -> e.get("ph").asText().equals("i") && e.get("pid").asInt() == 3)
                        .map(e -> e.get("tid").asInt() + " " + e.get("name").asText() + " " + e.get("ts").asLong() + " "
                                + e.get("args").get("task").asText()).toList());
        assertEquals(List.of("0=cpu 0", "1=cpu 1", "2=cpu 2"), ev.stream()
                .filter(e -> e.get("name").asText().equals("thread_name") && e.get("pid").asInt() == 3)
                .map(e -> e.get("tid").asInt() + "=" + e.get("args").get("name").asText()).toList());
        // kpemu's phases on their own process
        List<String> phases = ev.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("pid").asInt() == 2)
                .map(e -> e.get("name").asText() + " " + e.get("ts").asLong() + "+" + e.get("dur").asLong()).toList();
        assertEquals(List.of("boot 0+900000", "init 900000+300000"), phases);
    }

    /**
     * A file name whose bytes are not UTF-8 (issue 32): the arg shows U+FFFD, {@code fn.raw} holds
     * the printed value's exact bytes (quotes included) in base64, the task's name is Unicode.
     */
    @Test
    void bytesThatAreNotUtf8KeepTheirBytesBeside() throws Exception {
        RecordedTrace.Header h = new RecordedTrace.Header(Arch.X86_64, "6.1.0-56-amd64", null, null, null, null, null, "0.1.0-SNAPSHOT",
                "console=ttyS0 nokaslr", null, null, "init_kprobe_trace", null, DEFS, List.of());
        RecordedTrace t = RecordedTrace.of(h, List.of(
                "      \udcffc\u03c0\udce1-80      [000] .....     1.000100: myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn=\"/tmp/\u03c0x\udcff\""), "hand");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PerfettoTrace.of(t).write(bytes);
        JsonNode root = new ObjectMapper().readTree(bytes.toByteArray());
        List<JsonNode> ev = new ArrayList<>();
        root.get("traceEvents").forEach(ev::add);
        JsonNode open = ev.stream().filter(e -> e.get("name").asText().equals("myopen")).findFirst().orElseThrow();
        assertEquals("\"/tmp/\u03c0x\ufffd\"", open.get("args").get("fn").asText());
        assertEquals("Ii90bXAvz4B4/yI=", open.get("args").get("fn.raw").asText());   // '"' "/tmp/" cf 80 'x' ff '"'
        assertEquals(false, open.get("args").has("dfd.raw"));
        assertTrue(ev.stream().anyMatch(e -> e.get("name").asText().equals("thread_name") && e.get("args").get("name").asText().equals("\ufffdc\u03c0\ufffd-80")));
    }
}
