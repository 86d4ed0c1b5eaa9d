package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** kpemu faults (#29): every counted call a row, a row reproduced by its printed command, shards merged. */
class FaultsCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String COMMAND = "echo hi > /tmp/f; cat /tmp/f";

    @ParameterizedTest
    @CsvSource({"x86_64,__x64_sys_", "arm64,__arm64_sys_"})
    @Tag("kernel")
    void everyCountedCallIsARowReproducedByItsCommand(String arch, String prefix, @TempDir Path dir) throws Exception {
        String[] explore = {"faults", "--arch", arch, "--kernel", "debian:bookworm@6.1.0-56", "--fail-sites", prefix + "openat",
                "--fail-sites", prefix + "write", "--format", "json", "--", "sh", "-c", COMMAND};
        // one row after another in one worker: each row after the first reuses what the JVM kept
        // of the rows before (the kernel's tables, the machine at the exec, uncompressed)
        List<String> oneJob = new ArrayList<>(List.of(explore));
        oneJob.addAll(1, List.of("--jobs", "1"));
        CliTest.Run all = CliTest.run(oneJob.toArray(String[]::new));
        assertEquals(ExitCodes.OK, all.code(), all.err());
        Matcher counted = Pattern.compile("(\\d+) calls counted").matcher(all.err());
        assertTrue(counted.find(), all.err());
        List<JsonNode> rows = all.out().lines().map(FaultsCommandTest::json).toList();
        assertEquals(Integer.parseInt(counted.group(1)), rows.size(), all.out());
        for (int i = 0; i < rows.size(); i++) {
            JsonNode r = rows.get(i);
            assertEquals(i, r.get("index").asInt());
            assertEquals(1, r.get("injected").asInt(), "row " + i + ": the counted call came again in its run: " + r);
            assertTrue(r.get("function").asText().equals(prefix + "openat") || r.get("function").asText().equals(prefix + "write"), r.toString());
        }
        // sh opens /tmp/f for the redirection, cat opens it: the first and the second openat
        JsonNode first = row(rows, prefix + "openat", 1), second = row(rows, prefix + "openat", 2);
        assertEquals(1, first.get("exit").asInt());
        assertTrue(first.get("firstLine").asText().startsWith("sh: can't create /tmp/f: "), first.toString());
        assertEquals(1, second.get("exit").asInt());
        assertEquals("cat: can't open '/tmp/f': Invalid argument", second.get("firstLine").asText());

        // the second call's row, by its printed command, twice: the row's status and line, the same trace
        List<String> words = shellWords(second.get("reproduce").asText());
        assertEquals("kpemu", words.getFirst());
        String[] again = words.subList(1, words.size()).toArray(String[]::new);
        CliTest.Run once = CliTest.run(again), twice = CliTest.run(again);
        assertEquals(second.get("exit").asInt(), once.code(), once.err());
        assertTrue(once.err().lines().anyMatch(l -> l.equals(second.get("firstLine").asText())), once.err());
        assertTrue(once.out().matches("\\s+cat-\\d+\\s+\\[000\\] \\S{5}\\s+\\d+\\.\\d{6}: fail_function: \\(" + prefix
                + "openat\\+0x0/0x[0-9a-f]+\\) retval=-22\\n"), once.out());
        assertEquals(once.out(), twice.out());
        // the row ran from the machine kept in memory at the command's exec, the printed command
        // from the snapshot file at run_init_process: the same trace, byte for byte
        assertEquals(second.get("trace").asText(), once.out());
        assertEquals(once.code(), twice.code());
        // every row (at least three, run one after another) by its printed command: the same trace
        assertTrue(rows.size() >= 3, all.out());
        for (JsonNode r : rows) {
            if (r == second) continue;
            List<String> w = shellWords(r.get("reproduce").asText());
            CliTest.Run alone = CliTest.run(w.subList(1, w.size()).toArray(String[]::new));
            assertEquals(r.get("exit").asInt(), alone.code(), alone.err());
            assertEquals(r.get("trace").asText(), alone.out(), "row " + r.get("index").asInt());
        }

        // two shards merged: the same table
        Path one = dir.resolve("1.json"), two = dir.resolve("2.json");
        CliTest.Run s1 = CliTest.run(withShard(explore, "1/2")), s2 = CliTest.run(withShard(explore, "2/2"));
        assertEquals(ExitCodes.OK, s1.code(), s1.err());
        assertEquals(ExitCodes.OK, s2.code(), s2.err());
        Files.writeString(one, s1.out());
        Files.writeString(two, s2.out());
        CliTest.Run merged = CliTest.run("faults", "--merge", one.toString(), two.toString(), "--format", "json");
        assertEquals(ExitCodes.OK, merged.code(), merged.err());
        assertEquals(all.out(), merged.out());
        assertFalse(s1.out().isEmpty());
    }

    @Test
    void badInputIsOneLine() {
        CliTest.Run r = CliTest.run("faults", "--arch", "x86_64", "--kernel", "debian:bookworm@6.1.0-56", "--shard", "3/2", "--", "true");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: --shard 3/2: I must be 1 to N", r.err().lines().findFirst().orElse(""));
        r = CliTest.run("faults", "--arch", "x86_64", "--kernel", "debian:bookworm@6.1.0-56", "--fail-sites", "no_such_*", "--", "true");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: no function of the kernel's error-injection list matches no_such_*", r.err().lines().findFirst().orElse(""));
    }

    private static String[] withShard(String[] args, String shard) {
        List<String> l = new ArrayList<>(List.of(args));
        l.add(1, "--shard");
        l.add(2, shard);
        return l.toArray(String[]::new);
    }

    private static JsonNode row(List<JsonNode> rows, String function, int nth) {
        return rows.stream().filter(r -> r.get("function").asText().equals(function) && r.get("nth").asInt() == nth).findFirst()
                .orElseThrow(() -> new AssertionError("no row " + function + " nth=" + nth + " in " + rows));
    }

    private static JsonNode json(String line) {
        try {
            return JSON.readTree(line);
        } catch (Exception e) {
            throw new AssertionError("not JSON: " + line, e);
        }
    }

    /** POSIX shell words of a line that uses only spaces and single quotes ('\'' inside). */
    static List<String> shellWords(String line) {
        List<String> words = new ArrayList<>();
        StringBuilder w = null;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (c == ' ') {
                if (w != null) words.add(w.toString());
                w = null;
            } else if (c == '\'') {
                if (w == null) w = new StringBuilder();
                int end = line.indexOf('\'', i + 1);
                w.append(line, i + 1, end);
                i = end;
            } else if (c == '\\') {
                if (w == null) w = new StringBuilder();
                w.append(line.charAt(++i));
            } else {
                if (w == null) w = new StringBuilder();
                w.append(c);
            }
        }
        if (w != null) words.add(w.toString());
        return words;
    }
}
