package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/**
 * Which dialect a kernel release speaks: the releases are the Debian kernels whose answers were
 * recorded (guest-images/reference/ARCH/SERIES/dialect.error_log headers), and the names
 * {@code --dialect} takes.
 */
class DialectTest {
    @Test
    void recordedKernelsSpeakTheirOwnDialect() {
        assertEquals(Dialect.LINUX_6_1, Dialect.forRelease("6.1.0-56-amd64"));
        assertEquals(Dialect.LINUX_6_1, Dialect.forRelease("6.1.0-56-arm64"));
        assertEquals(Dialect.LINUX_6_12, Dialect.forRelease("6.12.117+deb13-amd64"));
        assertEquals(Dialect.LINUX_6_12, Dialect.forRelease("6.12.117+deb13-cloud-arm64"));
        assertEquals(Dialect.LINUX_7, Dialect.forRelease("7.2.13+deb14-amd64"));
        assertEquals(Dialect.LINUX_6_1, Dialect.forRelease(null));
    }

    @Test
    void namesTheDialectOptionTakes() {
        assertEquals(Dialect.LINUX_6_1, Dialect.byName("6.1"));
        assertEquals(Dialect.LINUX_6_12, Dialect.byName("6.12"));
        assertEquals(Dialect.LINUX_7, Dialect.byName("7"));
        assertEquals(Dialect.MAINLINE, Dialect.byName("mainline"));
        assertEquals(Dialect.LINUX_6_12, Dialect.byName("LINUX_6_12"));
        assertEquals(Dialect.LINUX_7, Dialect.byName("7.2.13+deb14-arm64"));
        assertNull(Dialect.byName("bsd"));
        assertEquals(false, Dialect.LINUX_6_1.hasBtfArgs());
        assertEquals(true, Dialect.LINUX_6_12.hasBtfArgs());
    }
}
