package dev.kpemu.session;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

/** The kernel's build-id note is told from the embedded vDSO's by the Linux note after it. */
class BuildIdTest {
    static void note(ByteArrayOutputStream o, String name, int type, byte[] desc) {
        byte[] n = (name + "\0").getBytes(StandardCharsets.ISO_8859_1);
        for (int v : new int[] {n.length, desc.length, type}) o.writeBytes(new byte[] {(byte) v, (byte) (v >> 8), (byte) (v >> 16), (byte) (v >> 24)});
        o.writeBytes(n);
        o.writeBytes(new byte[(4 - n.length % 4) % 4]);
        o.writeBytes(desc);
        o.writeBytes(new byte[(4 - desc.length % 4) % 4]);
    }

    static byte[] id(int first) {
        byte[] b = new byte[20];
        for (int i = 0; i < 20; i++) b[i] = (byte) (first + i);
        return b;
    }

    @Test
    void theKernelsNoteNotTheVdsos() {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        o.writeBytes(new byte[64]);
        note(o, "Linux", 0, new byte[] {0, 1, 6, 0});        // vDSO: LINUX_VERSION_CODE, then its build-id
        note(o, "GNU", 3, id(0x10));
        note(o, "Linux", 0, new byte[4]);
        o.writeBytes(new byte[32]);
        note(o, "GNU", 3, id(0xa0));                         // the kernel's .notes: build-id, then build salt
        note(o, "Linux", 0x100, "6.1.0-56-amd64\0".getBytes(StandardCharsets.ISO_8859_1));
        assertEquals("a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3", TracedBoot.buildId(o.toByteArray()));
        assertEquals(null, TracedBoot.buildId(new byte[100]));
    }
}
