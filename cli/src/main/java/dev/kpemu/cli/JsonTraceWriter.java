package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;

import dev.kpemu.kprobes.events.EventArg;
import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.FetchType;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * {@code boot --format json}: one JSON object per event, one per line (JSON Lines), with typed
 * fields; the schema is {@code docs/trace-event.schema.json}, described in {@code docs/json-trace.md}.
 * Numbers are JSON numbers (unsigned 64-bit values above 2^63 too), strings are strings, a
 * fetch that faulted (the trace's {@code (fault)}) is null and named in {@code faults}, arrays are
 * arrays; addresses are {@code 0x...} strings (a 64-bit kernel address does not fit a double).
 * Strings are valid Unicode: a string (or comm) whose guest bytes are not UTF-8 shows U+FFFD for
 * each byte that is not, and its exact bytes follow in base64, {@code raw_comm} and
 * {@code raw_args} ({@link GuestText}); a {@code char} is the one character whose code point is
 * its byte.
 */
final class JsonTraceWriter implements EventEngine.PassiveListener, AutoCloseable {
    private final JsonGenerator json;

    JsonTraceWriter(OutputStream out) {
        try {
            this.json = new JsonFactory().createGenerator(out, JsonEncoding.UTF8)
                    .disable(JsonGenerator.Feature.AUTO_CLOSE_TARGET);
            json.setRootValueSeparator(null);   // each object ends its own line
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override public void accept(TraceRecord r) {
        try {
            write(r);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void write(TraceRecord r) throws IOException {
        json.writeStartObject();
        json.writeStringField("event", r.event());
        json.writeStringField("group", r.group());
        json.writeNumberField("timestamp_ns", r.context().timestampNanos());
        json.writeNumberField("cpu", r.context().cpu());
        json.writeNumberField("pid", r.context().pid());
        String comm = r.context().comm();
        json.writeStringField("comm", GuestText.displayable(comm));
        json.writeStringField("flags", r.context().latency());
        json.writeObjectFieldStart("probe");
        String probe = r.probeText();
        if (r.isReturn()) {
            json.writeStringField("type", r.isUprobe() ? "uretprobe" : "kretprobe");
            int arrow = probe.indexOf(" <- ");
            json.writeStringField("func", hex(r.ip()));
            json.writeStringField("func_symbol", arrow < 0 ? "" : probe.substring(arrow + 4));
            json.writeStringField("ret_ip", hex(r.retIp()));
            json.writeStringField("ret_symbol", arrow < 0 ? probe : probe.substring(0, arrow));
        } else {
            json.writeStringField("type", r.isUprobe() ? "uprobe" : "kprobe");
            json.writeStringField("ip", hex(r.ip()));
            json.writeStringField("symbol", probe);
        }
        json.writeEndObject();
        json.writeObjectFieldStart("args");
        java.util.List<String> faults = new java.util.ArrayList<>();
        java.util.List<EventArg> raw = new java.util.ArrayList<>();
        for (EventArg a : r.args()) {
            json.writeFieldName(a.name());
            if (a.isArray()) {
                json.writeStartArray();
                boolean faulted = false;
                for (Object e : a.elements()) faulted |= value(a.type(), e, null);
                json.writeEndArray();
                if (faulted) faults.add(a.name());
                if (a.type().isString() && a.elements().stream().anyMatch(e -> e instanceof String t && GuestText.hasRawBytes(t))) raw.add(a);
            } else if (value(a.type(), a.value(), a.symbol())) {
                faults.add(a.name());
            } else if (a.value() instanceof String t && GuestText.hasRawBytes(t)) {
                raw.add(a);
            }
        }
        json.writeEndObject();
        json.writeArrayFieldStart("faults");
        for (String f : faults) json.writeString(f);
        json.writeEndArray();
        // the exact bytes of strings that are not UTF-8 (base64), only when there are any
        if (GuestText.hasRawBytes(comm)) json.writeStringField("raw_comm", GuestText.base64(comm));
        if (!raw.isEmpty()) {
            json.writeObjectFieldStart("raw_args");
            for (EventArg a : raw) {
                json.writeFieldName(a.name());
                if (a.isArray()) {
                    json.writeStartArray();
                    for (Object e : a.elements()) {
                        if (e instanceof String t) json.writeString(GuestText.base64(t));
                        else json.writeNull();
                    }
                    json.writeEndArray();
                } else {
                    json.writeString(GuestText.base64((String) a.value()));
                }
            }
            json.writeEndObject();
        }
        json.writeEndObject();
        json.writeRaw('\n');
        json.flush();
    }

    /** Writes one value; true when it is a faulted fetch (written as null). */
    private boolean value(FetchType type, Object v, String symbol) throws IOException {
        if (type.isString()) {
            if (v == null) {
                json.writeNull();
                return true;
            }
            json.writeString(GuestText.displayable((String) v));
            return false;
        }
        long bits = (Long) v;
        switch (type) {
            case CHAR -> json.writeString(String.valueOf((char) (bits & 0xff)));
            case SYMBOL -> json.writeString(symbol != null ? symbol : hex(bits));
            case U64, X64 -> {
                if (bits >= 0) json.writeNumber(bits);
                else json.writeNumber(new BigInteger(Long.toUnsignedString(bits)));
            }
            default -> json.writeNumber(bits);
        }
        return false;
    }

    private static String hex(long v) { return "0x" + Long.toHexString(v); }

    @Override public void close() throws IOException {
        json.close();
    }
}
