package dev.kpemu.cli;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Terminal input with its guest times ({@code boot -i --record-input FILE} writes it,
 * {@code boot --input FILE} replays it): JSON Lines, one object per delivery, in guest-time order:
 * <pre>
 * {"guest_ns":4350000000,"text":"echo hi\r"}
 * {"guest_ns":4360000000,"base64":"AQ=="}     (bytes that are not UTF-8)
 * {"guest_ns":9120000000,"stop":true}          (the session ended here: Ctrl-A x)
 * </pre>
 * {@code guest_ns} is the guest time at which the bytes entered the terminal UART (a poll of
 * {@link dev.kpemu.boot.TerminalInput}); written by hand, a time between polls is delivered at the
 * next poll.
 */
final class InputScript {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One delivery: bytes at a guest time, or the end of the session ({@code stop}). */
    record Entry(long guestNanos, byte[] bytes, boolean stop) {}

    /** A file that is not an input script: one line says where. */
    static final class MalformedInputException extends Exception {
        MalformedInputException(String message) { super(message); }
    }

    private InputScript() {}

    static List<Entry> read(Path file) throws IOException, MalformedInputException {
        List<Entry> out = new ArrayList<>();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        long last = Long.MIN_VALUE;
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i).strip();
            if (l.isEmpty()) continue;
            String where = file + ":" + (i + 1) + ": ";
            JsonNode n;
            try {
                n = JSON.readTree(l);
            } catch (JsonProcessingException e) {
                throw new MalformedInputException(where + "not a JSON object: " + e.getOriginalMessage());
            }
            if (!n.isObject() || !n.path("guest_ns").canConvertToLong() || !n.path("guest_ns").isIntegralNumber())
                throw new MalformedInputException(where + "needs \"guest_ns\" (guest time in nanoseconds)");
            long t = n.get("guest_ns").asLong();
            if (t < last) throw new MalformedInputException(where + "guest_ns goes back in time");
            last = t;
            if (n.path("stop").asBoolean(false)) {
                out.add(new Entry(t, new byte[0], true));
            } else if (n.has("text")) {
                out.add(new Entry(t, n.get("text").asText().getBytes(StandardCharsets.UTF_8), false));
            } else if (n.has("base64")) {
                try {
                    out.add(new Entry(t, n.get("base64").binaryValue(), false));
                } catch (IOException e) {
                    throw new MalformedInputException(where + "\"base64\" is not base64");
                }
            } else {
                throw new MalformedInputException(where + "needs \"text\", \"base64\" or \"stop\"");
            }
        }
        return out;
    }

    /** Writes entries as they happen (flushed per line, so an interrupted session keeps what it had). */
    static final class Writer implements AutoCloseable {
        private final BufferedWriter out;

        Writer(Path file) throws IOException {
            out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
        }

        void add(Entry e) {
            ObjectNode n = JSON.createObjectNode().put("guest_ns", e.guestNanos());
            if (e.stop()) {
                n.put("stop", true);
            } else {
                String text = utf8(e.bytes());
                if (text != null) n.put("text", text);
                else n.put("base64", e.bytes());
            }
            try {
                out.write(JSON.writeValueAsString(n));
                out.newLine();
                out.flush();
            } catch (IOException ex) {
                throw new java.io.UncheckedIOException(ex);
            }
        }

        @Override public void close() throws IOException { out.close(); }

        private static String utf8(byte[] b) {
            try {
                return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b)).toString();
            } catch (CharacterCodingException e) {
                return null;
            }
        }
    }
}
