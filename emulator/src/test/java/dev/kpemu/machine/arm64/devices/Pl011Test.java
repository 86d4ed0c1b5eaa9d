package dev.kpemu.machine.arm64.devices;

import static dev.kpemu.machine.arm64.devices.Pl011.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class Pl011Test {
    final ByteArrayOutputStream out = new ByteArrayOutputStream();
    final List<Boolean> irq = new ArrayList<>();
    final Pl011 u = new Pl011(out::write, irq::add);

    @Test
    void primeCellIdentification() {
        int[] want = {0x11, 0x10, 0x14, 0x00, 0x0d, 0xf0, 0x05, 0xb1};
        for (int i = 0; i < 8; i++) assertEquals(want[i], u.read(0xfe0 + 4 * i, 4), "ID register 0x" + Integer.toHexString(0xfe0 + 4 * i));
    }

    @Test
    void resetStateAndFlags() {
        assertEquals(CR_RESET, u.read(UARTCR, 4));
        assertEquals(IFLS_RESET, u.read(UARTIFLS, 4));
        long fr = u.read(UARTFR, 4);
        assertTrue((fr & FR_TXFE) != 0 && (fr & FR_RXFE) != 0);
        assertEquals(0, fr & (FR_BUSY | FR_TXFF));
    }

    @Test
    void transmitsToTheSinkAndKeepsConfiguration() {
        for (byte b : "hi\n".getBytes()) u.write(UARTDR, 4, b);
        assertEquals("hi\n", out.toString());
        assertEquals(3, u.transmitted());
        u.write(UARTIBRD, 4, 13);
        u.write(UARTFBRD, 4, 1);
        u.write(UARTLCR_H, 4, 0x70);
        assertEquals(13, u.read(UARTIBRD, 4));
        assertEquals(1, u.read(UARTFBRD, 4));
        assertEquals(0x70, u.read(UARTLCR_H, 4));
    }

    @Test
    void transmitInterruptFollowsMaskAndClear() {
        u.write(UARTDR, 4, 'x');
        assertEquals(INT_TX, u.read(UARTRIS, 4) & INT_TX, "TX raw status after a write");
        assertEquals(0, u.read(UARTMIS, 4));
        assertTrue(irq.isEmpty(), "masked: line stays low");
        u.write(UARTIMSC, 4, INT_TX);
        assertEquals(List.of(true), irq);
        assertEquals(INT_TX, u.read(UARTMIS, 4));
        u.write(UARTICR, 4, INT_TX);
        assertEquals(List.of(true, false), irq);
        assertFalse(u.interruptLevel());
    }

    @Test
    void receiveInterruptWhileDataWaits() {
        u.write(UARTIMSC, 4, INT_RX | INT_RT);
        u.input("ab".getBytes());
        assertEquals(List.of(true), irq);
        assertEquals(0, u.read(UARTFR, 4) & FR_RXFE);
        assertEquals('a', u.read(UARTDR, 4));
        u.write(UARTICR, 4, INT_RX | INT_RT);
        assertTrue(u.interruptLevel(), "still one byte");
        assertEquals('b', u.read(UARTDR, 4));
        assertFalse(u.interruptLevel());
        assertTrue((u.read(UARTFR, 4) & FR_RXFE) != 0);
    }

    @Test
    void receiveSpaceIsWhatTheFifoStillHolds() {
        assertEquals(Pl011.RX_FIFO_DEPTH, u.receiveSpace());
        u.input("abc".getBytes());
        assertEquals(Pl011.RX_FIFO_DEPTH - 3, u.receiveSpace());
        u.read(UARTDR, 4);
        assertEquals(Pl011.RX_FIFO_DEPTH - 2, u.receiveSpace());
    }
}
