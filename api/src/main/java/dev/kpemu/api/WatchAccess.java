package dev.kpemu.api;

/**
 * One access to a {@link Watchpoint}, as the hardware reports it: {@code ip} where Linux's
 * hw_breakpoint handler would see it (x86-64: the instruction after the access; arm64: the
 * accessing instruction), {@code pc} the accessing instruction itself, the kernel-virtual
 * {@code address} of the access's first byte and its physical address, its {@code size}, the
 * bytes there {@code oldValue} before and {@code newValue} after (little-endian, {@code size}
 * bytes; a read: both the value read), the task ({@code comm}, {@code pid}: as the kernel's
 * {@code current}) and the {@code cpu}.
 */
public final class WatchAccess {
    private final Watchpoint watchpoint;
    private final long ip, pc, address, physicalAddress, oldValue, newValue, guestNanos;
    private final int size, pid, cpu;
    private final boolean write;
    private final String comm;
    private final Runnable stop;

    WatchAccess(Watchpoint watchpoint, long ip, long pc, long address, long physicalAddress, int size, boolean write,
                long oldValue, long newValue, String comm, int pid, int cpu, long guestNanos, Runnable stop) {
        this.watchpoint = watchpoint;
        this.ip = ip;
        this.pc = pc;
        this.address = address;
        this.physicalAddress = physicalAddress;
        this.size = size;
        this.write = write;
        this.oldValue = oldValue;
        this.newValue = newValue;
        this.comm = comm;
        this.pid = pid;
        this.cpu = cpu;
        this.guestNanos = guestNanos;
        this.stop = stop;
    }

    public Watchpoint watchpoint() { return watchpoint; }
    public long ip() { return ip; }
    public long pc() { return pc; }
    public long address() { return address; }
    public long physicalAddress() { return physicalAddress; }
    public int size() { return size; }
    public boolean isWrite() { return write; }
    public long oldValue() { return oldValue; }
    public long newValue() { return newValue; }
    public String comm() { return comm; }
    public int pid() { return pid; }
    public int cpu() { return cpu; }
    public long guestNanos() { return guestNanos; }

    /**
     * Stops the guest at the end of the translated block that made the access
     * ({@code Watchpoints.stopAt}): the session ends with {@link Outcome#STOPPED}.
     */
    public void stopGuest() { stop.run(); }

    @Override public String toString() {
        return String.format("%s %s of %d bytes at 0x%x by 0x%x: 0x%x -> 0x%x (%s-%d, cpu %d)", watchpoint, write ? "write" : "read",
                size, address, ip, oldValue, newValue, comm, pid, cpu);
    }
}
