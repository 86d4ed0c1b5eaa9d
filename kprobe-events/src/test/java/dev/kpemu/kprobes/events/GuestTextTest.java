package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.machine.Arch;

/**
 * {@link GuestText}: guest bytes through Java strings and back, unchanged, for every byte
 * sequence; and the trace's readers and writers that use it (issue 32). The byte sequences are
 * the ones {@code guest-images/reference/rawbytes.init} gives Linux: Linux's {@code trace} prints
 * them as they are ({@code reference/ARCH/SERIES/rawbytes.trace}).
 */
class GuestTextTest {
    private static byte[] b(int... v) {
        byte[] r = new byte[v.length];
        for (int i = 0; i < v.length; i++) r[i] = (byte) v[i];
        return r;
    }

    @Test
    void utf8IsTextAndEveryOtherByteOneEscape() {
        // π x 0xff: the valid sequence decodes, the lone 0xff is U+DCFF
        assertEquals("/tmp/\u03c0x\udcff", GuestText.decode(b('/', 't', 'm', 'p', '/', 0xcf, 0x80, 'x', 0xff)));
        // an encoded surrogate (ED B2 80, U+DC80 in CESU form) is three bytes that are not UTF-8,
        // not U+DC80, which would encode back as the one byte 0x80
        assertEquals("\udced\udcb2\udc80", GuestText.decode(b(0xed, 0xb2, 0x80)));
        // an overlong '/', a truncated three-byte sequence
        assertEquals("\udcc0\udcaf\udce2\udc82", GuestText.decode(b(0xc0, 0xaf, 0xe2, 0x82)));
        // above U+10FFFF, and a four-byte character (U+1F600) that is fine
        assertEquals("\udcf4\udc90\udc80\udc80", GuestText.decode(b(0xf4, 0x90, 0x80, 0x80)));
        assertEquals("\ud83d\ude00", GuestText.decode(b(0xf0, 0x9f, 0x98, 0x80)));
        assertEquals("plain", GuestText.decode("plain".getBytes(StandardCharsets.US_ASCII)));
    }

    @Test
    void everyByteSequenceComesBackUnchanged() {
        Random r = new Random(32);
        for (int n = 0; n < 20_000; n++) {
            byte[] bytes = new byte[r.nextInt(12)];
            // mostly bytes around the UTF-8 boundaries, so sequences are often nearly valid
            for (int i = 0; i < bytes.length; i++) {
                int pick = r.nextInt(4);
                bytes[i] = (byte) (pick == 0 ? r.nextInt(0x80) : pick == 1 ? 0x80 + r.nextInt(0x40) : pick == 2 ? 0xc0 + r.nextInt(0x40) : r.nextInt(256));
            }
            String s = GuestText.decode(bytes);
            assertArrayEquals(bytes, GuestText.encode(s), () -> java.util.HexFormat.of().formatHex(bytes));
            assertEquals(new String(bytes, StandardCharsets.UTF_8).equals(s), !GuestText.hasRawBytes(s),
                    "escapes only where Java's UTF-8 decoder finds bytes that are not UTF-8");
            // the stream encoder and decoder agree with the one-shot methods
            assertArrayEquals(bytes, s.getBytes(GuestText.CHARSET));
            // (a stream decoder cannot see the input's end: a sequence cut by it is the one case
            // its readers avoid, reading lines, which end in ASCII)
            byte[] line = java.util.Arrays.copyOf(bytes, bytes.length + 1);
            line[bytes.length] = '\n';
            assertEquals(s + "\n", new String(line, GuestText.CHARSET));
        }
    }

    @Test
    void textAroundEscapesStaysWhatItWas() {
        String v = GuestText.decode(b(0xe2, 0x82));              // a cut sequence
        String line = "uname: (do_sys_openat2+0x0/0x170) fn=\"" + v + "\" c=\"init\"";
        assertEquals(line, GuestText.decode(GuestText.encode(line)), "ASCII never continues a sequence");
    }

    @Test
    void charsPrintTheirByteAndDisplaysAreUnicode() {
        assertEquals("A", GuestText.ofByte('A'));
        assertArrayEquals(b(0xff), GuestText.encode(GuestText.ofByte(0xff)));
        assertEquals("/tmp/\u03c0x\ufffd", GuestText.displayable("/tmp/\u03c0x\udcff"));
        assertEquals("L3RtcC/PgHj/", GuestText.base64("/tmp/\u03c0x\udcff"));
        assertFalse(GuestText.hasRawBytes("/tmp/\u03c0x"));
        assertEquals("/\u00cf\u0080x\u00ff", GuestText.byteString("/\u03c0x\udcff"), "one char per byte");
    }

    @Test
    void aPrintStreamWritesTheBytes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, GuestText.CHARSET);
        ps.println("fn=\"/tmp/\u03c0x\udcff\"");
        assertArrayEquals(b('f', 'n', '=', '"', '/', 't', 'm', 'p', '/', 0xcf, 0x80, 'x', 0xff, '"', '\n'), out.toByteArray());
    }

    /**
     * The stream encoder over array buffers (as a writer's, which copies ASCII runs array to array)
     * gives {@link GuestText#encode}'s bytes (its general loop: a string's buffer has no array),
     * whatever the output buffer's size, so a run cut by a full buffer goes on in the next one.
     */
    @Test
    void theStreamEncoderGivesTheSameBytesInBuffersOfAnySize() throws Exception {
        String line = "  cat-93 [000] d.... 12.5: jobopen: (do_sys_openat2+0x0/0x170) fn=\"/tmp/\u03c0x\udcff\ud83d\ude00\" n=\"a\u00e9\"\n";
        byte[] expected = GuestText.encode(line);
        for (int size = 4; size <= expected.length + 1; size++) {
            java.nio.charset.CharsetEncoder enc = GuestText.CHARSET.newEncoder();
            java.nio.CharBuffer in = java.nio.CharBuffer.wrap(line.toCharArray(), 1, line.length() - 1).slice();
            java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(size);
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            got.write(line.charAt(0));
            while (true) {
                java.nio.charset.CoderResult r = enc.encode(in, buf, true);
                got.write(buf.array(), 0, buf.position());
                buf.clear();
                if (r.isUnderflow()) break;
                assertTrue(r.isOverflow(), r.toString());
            }
            assertArrayEquals(expected, got.toByteArray(), "output buffer of " + size + " bytes");
        }
    }

    /** A golden with such bytes: written and read back (whole, and event by event) with the same text. */
    @Test
    void recordedTracesKeepTheBytes(@TempDir Path tmp) throws Exception {
        String def = "p:uname do_sys_openat2 fn=+0($arg2):ustring c=$comm";
        String line = "           \udcffc\u03c0\udce1-91      [000] .....     1.500000: uname: (do_sys_openat2+0x0/0x170) fn=\"/tmp/\u03c0x\udcff\" c=\"\udcffc\u03c0\udce1\"";
        RecordedTrace.Header h = new RecordedTrace.Header(Arch.X86_64, "6.1.0-56-amd64", null, null, null, null, null, "0.1.0-SNAPSHOT",
                "console=ttyS0 nokaslr", null, null, "init_kprobe_trace", null, List.of(def), List.of());
        Path file = tmp.resolve("golden.trace");
        try (RecordedTraceWriter w = new RecordedTraceWriter(file, Arch.X86_64, List.of(def))) {
            w.add(line);
            w.finish(h);
        }
        byte[] raw = Files.readAllBytes(file);
        String asLatin1 = new String(raw, StandardCharsets.ISO_8859_1);
        assertTrue(asLatin1.contains("fn=\"/tmp/\u00cf\u0080x\u00ff\" c=\"\u00ffc\u00cf\u0080\u00e1\""), "the file holds the bytes themselves");
        RecordedTrace t = RecordedTrace.read(file);
        assertEquals(1, t.events().size());
        assertEquals("\"/tmp/\u03c0x\udcff\"", t.events().get(0).args().get(0).value(), () -> t.events().get(0).toString());
        assertEquals("\udcffc\u03c0\udce1", t.events().get(0).context().comm());
        try (RecordedTraceReader r = RecordedTraceReader.open(file)) {
            assertEquals(t.events().get(0), r.next());
        }
        RecordedTrace.write(tmp.resolve("again.trace"), h, List.of(line));
        assertEquals(t.events(), RecordedTrace.read(tmp.resolve("again.trace")).events());
    }

    /**
     * A hist key on a string keeps the guest's bytes (the key is {@code char[64]} of them) and the
     * {@code hist} file pads {@code %-50s} to 50 bytes, as the kernel's {@code seq_printf} counts:
     * {@code /tmp/πx\xff} is 9 bytes (8 chars), so 41 spaces follow it.
     */
    @Test
    void histKeysAreBytes() throws Exception {
        TraceProbe def = (TraceProbe) new ProbeParser(Arch.X86_64).parseAll("p:e do_sys_openat2 fn=+0(%si):ustring").get(0);
        var t = dev.kpemu.kprobes.events.hist.HistTrigger.parse("hist:keys=fn", EventFields.of(def), KernelSymbols.permissive(), false);
        String fn = "/tmp/\u03c0x\udcff";
        t.accept(new TraceRecord("kprobes", "e", new TraceContext("cat", 7, 0, ".....", 0), "e: (x)", false, 0x1000, 0, 2000,
                List.of(new EventArg("fn", FetchType.USTRING, 0, fn, null))));
        String hist = t.show(2000);
        String entry = hist.lines().filter(l -> l.startsWith("{ fn: ")).findFirst().orElseThrow(() -> new AssertionError(hist));
        assertEquals("{ fn: " + fn + " ".repeat(41) + " } hitcount:          1", entry);
        assertArrayEquals(b('{', ' ', 'f', 'n', ':', ' ', '/', 't', 'm', 'p', '/', 0xcf, 0x80, 'x', 0xff),
                java.util.Arrays.copyOf(GuestText.encode(entry), 15));
    }
}
