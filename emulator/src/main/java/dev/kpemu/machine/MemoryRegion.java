package dev.kpemu.machine;

/** A named range of guest-physical address space. */
public record MemoryRegion(String name, long base, long size, Kind kind) {
    public enum Kind { RAM, MMIO }

    public long end() { return base + size; }

    public boolean contains(long pa) { return Long.compareUnsigned(pa, base) >= 0 && Long.compareUnsigned(pa, end()) < 0; }

    @Override public String toString() {
        return String.format("%-12s %s 0x%012x-0x%012x (%d KiB)", name, kind, base, end() - 1, size >> 10);
    }
}
