package dev.kpemu.machine.x86.devices;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.VirtualClock;

/**
 * Devices restored from their saved state continue as they were: a PIT's pending interrupt
 * fires at the guest time it was due, and a partly read counter latch reads on; two events due
 * at the same time keep their order. Expected times by hand: the PIT's k-th rate-generator edge
 * is at ceil(k × 1193 × 10^9 / 1,193,182) ns: 999,848, 1,999,695, 2,999,543, 3,999,390.
 */
class StatefulDevicesTest {
    private static byte[] save(VirtualClock clock, Pit8254 pit) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(b);
        clock.saveState(out);
        pit.saveState(out);
        out.flush();
        return b.toByteArray();
    }

    private static void restore(byte[] state, VirtualClock clock, Pit8254 pit) throws IOException {
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(state));
        clock.restoreState(in);
        pit.restoreState(in);
        assertEquals(-1, in.read(), "everything saved is read back");
    }

    /** Fires the clock's events one by one until {@code until} ns, recording when each PIT edge came. */
    private static List<Long> run(VirtualClock clock, long until, List<Long> edges) {
        while (clock.instructionsUntilNextEvent() != Long.MAX_VALUE && clock.nanos() + clock.instructionsUntilNextEvent() <= until) {
            clock.advance(clock.instructionsUntilNextEvent());
            clock.fireDue();
        }
        return edges;
    }

    @Test
    void restoredPitFiresWhenTheSavedOneWould() throws IOException {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        List<Long> edges = new ArrayList<>();
        Pit8254 pit = new Pit8254(clock, level -> { if (level) edges.add(clock.nanos()); });
        pit.out(Pit8254.MODE, 1, 0x34);                  // channel 0, lo/hi, mode 2
        pit.out(Pit8254.CH0, 1, 1193 & 0xff);
        pit.out(Pit8254.CH0, 1, 1193 >> 8);
        pit.out(Pit8254.MODE, 1, 0x80 | 0x30 | 0x04);    // channel 2, lo/hi, mode 2
        pit.out(Pit8254.CH2, 1, 0x34);
        pit.out(Pit8254.CH2, 1, 0x12);
        run(clock, 1_500_000, edges);
        assertEquals(List.of(999_848L), edges);
        clock.advance(1_000);
        pit.out(Pit8254.MODE, 1, 0x80);                  // latch channel 2
        int lo = pit.in(Pit8254.CH2, 1);                 // the low byte read before the snapshot

        byte[] state = save(clock, pit);
        VirtualClock clock2 = new VirtualClock(1_000_000_000L);
        List<Long> edges2 = new ArrayList<>();
        Pit8254 pit2 = new Pit8254(clock2, level -> { if (level) edges2.add(clock2.nanos()); });
        restore(state, clock2, pit2);

        assertEquals(clock.nanos(), clock2.nanos());
        int hi = pit.in(Pit8254.CH2, 1), hi2 = pit2.in(Pit8254.CH2, 1);
        assertEquals(hi, hi2, "the latch's high byte, after the low one was read before the snapshot");
        assertEquals(0x1234 - (int) (((clock.nanos() - 0) * 1_193_182L) / 1_000_000_000L % 0x1234) & 0xffff, lo | hi << 8,
                "the latched count of a channel loaded with 0x1234 at time 0");
        run(clock, 4_000_000, edges);
        run(clock2, 4_000_000, edges2);
        assertEquals(List.of(999_848L, 1_999_695L, 2_999_543L, 3_999_390L), edges);
        assertEquals(List.of(1_999_695L, 2_999_543L, 3_999_390L), edges2, "the restored PIT's edges, at the same guest times");
    }

    @Test
    void eventsDueTogetherKeepTheirOrder() throws IOException {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        List<String> fired = new ArrayList<>();
        Object a = clock.schedule(5_000, now -> fired.add("a"));
        Object b = clock.schedule(5_000, now -> fired.add("b"));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(buf);
        clock.saveState(out);
        clock.writeEvent(out, b);        // saved in the other order than scheduled
        clock.writeEvent(out, a);
        clock.writeEvent(out, null);
        VirtualClock restored = new VirtualClock(1_000_000_000L);
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(buf.toByteArray()));
        restored.restoreState(in);
        restored.readEvent(in, now -> fired.add("b"));
        restored.readEvent(in, now -> fired.add("a"));
        assertEquals(null, restored.readEvent(in, now -> fired.add("none")));
        restored.advance(5_000);
        restored.fireDue();
        assertEquals(List.of("a", "b"), fired, "scheduled first, fired first");
    }
}
