package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code boot --format json -o FILE}: every line is one JSON object valid against the documented
 * schema ({@code docs/trace-event.schema.json}, checked with a JSON Schema validator), and each
 * object says what the ftrace line of the same event says: the same run's {@code --record} file
 * holds those lines (event, probe point, every argument: signed and hex numbers, strings, a
 * fetch that faulted). A filter applies to both; standard output holds no trace, and the hist
 * file follows on standard output.
 */
class JsonTraceTest {
    @Test
    @Tag("kernel")
    void jsonLinesFollowTheSchemaAndSayWhatTheTraceSays(@TempDir Path tmp) throws Exception {
        Path json = tmp.resolve("trace.jsonl"), rec = tmp.resolve("trace.rec");
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--console", tmp.resolve("console.txt").toString(),
                "-e", "p:myopen do_sys_openat2 dfd=%di:s32 fn=+0(%si):ustring flags=+0(%dx):x64 bad=+0(%di):string",
                "-e", "r:myret do_sys_openat2 ret=$retval:s64",
                "--filter", "myopen:fn ~ \"/proc/*\"", "--trigger", "myret:hist:keys=ret",
                "--format", "json", "-o", json.toString(), "--record", rec.toString());
        assertEquals(ExitCodes.OK, r.code(), r.err());
        assertTrue(r.out().startsWith("kpemu: events/kprobes/myret/hist\n# event histogram\n"), "the hist file on stdout, no trace: " + r.out());

        ObjectMapper mapper = new ObjectMapper();
        Path schemaFile = NativeLibraries.repositoryRoot().resolve("docs/trace-event.schema.json");
        JsonSchema schema = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012).getSchema(mapper.readTree(schemaFile.toFile()));
        List<JsonNode> objects = new ArrayList<>();
        for (String line : Files.readAllLines(json)) {
            JsonNode n = mapper.readTree(line);
            Set<ValidationMessage> problems = schema.validate(n);
            assertTrue(problems.isEmpty(), problems + " in " + line);
            objects.add(n);
        }
        List<ReferenceTrace.Event> lines = RecordedTrace.read(rec).events();
        assertEquals(lines.size(), objects.size(), "one JSON object per trace line");
        assertTrue(lines.stream().anyMatch(e -> e.name().equals("myopen")) && lines.stream().anyMatch(e -> e.name().equals("myret")));
        for (int i = 0; i < lines.size(); i++) {
            ReferenceTrace.Event want = lines.get(i);
            JsonNode got = objects.get(i);
            assertEquals(want.name(), got.get("event").asText());
            JsonNode probe = got.get("probe");
            String point = probe.get("type").asText().equals("kprobe") ? probe.get("symbol").asText()
                    : probe.get("ret_symbol").asText() + " <- " + probe.get("func_symbol").asText();
            assertTrue(want.body().startsWith(want.name() + ": (" + point + ")"), want.body() + " vs " + got);
            assertEquals(want.args().size(), got.get("args").size(), want.body());
            for (ReferenceTrace.Arg a : want.args()) {
                JsonNode v = got.get("args").get(a.name());
                String printed = switch (a.name()) {
                    case "flags" -> "0x" + Long.toHexString(v.asLong());
                    case "fn", "bad" -> v.isNull() ? "(fault)" : "\"" + v.asText() + "\"";
                    default -> v.asText();
                };
                assertEquals(a.value(), printed, a.name() + " of " + want.body());
                boolean faulted = false;
                for (JsonNode f : got.get("faults")) faulted |= f.asText().equals(a.name());
                assertEquals(a.value().equals("(fault)"), faulted, "faults names " + a.name() + " in " + got);
            }
            if (want.name().equals("myopen")) assertTrue(want.body().contains("fn=\"/proc/"), "the filter applies: " + want.body());
        }
        assertTrue(lines.stream().anyMatch(e -> e.body().contains("bad=(fault)")), "a faulted fetch was traced");
    }
}
