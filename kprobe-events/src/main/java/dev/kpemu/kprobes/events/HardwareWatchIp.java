package dev.kpemu.kprobes.events;

import java.util.HashMap;
import java.util.Map;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * Where a data watchpoint's report puts the ip, as the hardware does: x86-64's data breakpoints
 * trap after the access, so Linux's handler sees the instruction after the accessing one (gdb's pc
 * in {@code reference/x86_64/6.1/watch-jiffies.trace} is that one); arm64's watchpoints report
 * before it, at the accessing instruction (not yet confirmed by a recording). The next
 * instruction is decoded from guest memory once per accessing pc. Confined to the emulation
 * thread (its Capstone handle); close it when done.
 */
public final class HardwareWatchIp implements AutoCloseable {
    private final Machine machine;
    private final Map<Long, Long> next = new HashMap<>();
    private Decoder decoder;

    public HardwareWatchIp(Machine machine) {
        this.machine = machine;
    }

    /** The ip reported for an access made by the instruction at {@code pc}. */
    public long of(long pc) {
        if (machine.arch() != Arch.X86_64) return pc;
        Long ip = next.get(pc);
        if (ip != null) return ip;
        if (decoder == null) decoder = Decoder.open(machine.arch());
        long after = pc;
        for (int len = 16; len > 0; len--) {       // the bytes up to a page end may be all that is mapped
            try {
                after = decoder.decodeOne(machine.readVirtual(pc, len), pc).nextAddress();
                break;
            } catch (RuntimeException e) {
                // fewer bytes
            }
        }
        next.put(pc, after);
        return after;
    }

    @Override public void close() {
        if (decoder != null) decoder.close();
        decoder = null;
    }
}
