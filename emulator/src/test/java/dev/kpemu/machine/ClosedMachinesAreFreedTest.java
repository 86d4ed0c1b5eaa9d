package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.x86.X86Machine;

/**
 * A closed machine leaves nothing on the Java heap: no upcall stub or hook state of its engine
 * keeps it reachable. (A machine whose native system-call hook kept its upcall stub in an
 * automatic arena stayed reachable from the stub's own target for ever: a test JVM that booted a
 * few dozen kernels ran out of heap.)
 */
class ClosedMachinesAreFreedTest {
    static final int MACHINES = 4;

    @Test
    void closedX86AndArm64MachinesAreGarbage() throws InterruptedException {
        List<WeakReference<Machine>> refs = new ArrayList<>();
        for (int i = 0; i < MACHINES; i++) {
            Machine x = X86Machine.create(16 << 20);
            x.close();
            refs.add(new WeakReference<>(x));
            Machine a = Arm64Machine.create(16 << 20);
            a.close();
            refs.add(new WeakReference<>(a));
        }
        // a full collection clears weak references to unreachable objects; more rounds allow for
        // cleaner threads that drop the last native-side references (on a busy host they run late:
        // up to 20 s, where an idle one needs a round or two)
        for (int round = 0; round < 400 && refs.stream().anyMatch(r -> r.get() != null); round++) {
            System.gc();
            Thread.sleep(50);
        }
        long alive = refs.stream().filter(r -> r.get() != null).count();
        assertTrue(alive == 0, alive + " of " + refs.size() + " closed machines are still reachable");
    }
}
