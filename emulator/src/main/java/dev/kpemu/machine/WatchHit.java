package dev.kpemu.machine;

/**
 * One guest access to a watched range ({@link Watchpoints}), as the hardware would report it:
 * {@code cpu} the vCPU that made it, {@code pc} the address of the accessing instruction (x86's
 * data breakpoints trap after it, arm64's watchpoints before it: what a report prints is the
 * caller's choice), {@code physicalAddress} and {@code size} the access as the engine made it (a
 * page-crossing store arrives whole; a string instruction once per element), {@code oldValue} the
 * bytes there before it and {@code newValue} after it (little-endian, {@code size} bytes; a read
 * has both equal to the value read).
 */
public record WatchHit(Watchpoints.Watch watch, int cpu, long pc, long physicalAddress, int size, boolean write,
                       long oldValue, long newValue) {}
