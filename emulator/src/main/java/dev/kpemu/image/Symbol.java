package dev.kpemu.image;

/**
 * A kernel symbol as /proc/kallsyms shows it.
 *
 * @param name    symbol name
 * @param address link-time virtual address (nokaslr)
 * @param type    nm-style type: T/t text, D/d data, R/r read-only, B/b bss, A absolute, ...
 * @param size    distance to the next higher symbol address (0 for the last symbol)
 */
public record Symbol(String name, long address, char type, long size) {
    /** Upper-case type: visible outside its translation unit. */
    public boolean global() { return Character.isUpperCase(type); }

    /** Code: T/t, and W/w (weak functions; kallsyms shows weak objects as V/v). */
    public boolean text() { return type == 'T' || type == 't' || type == 'W' || type == 'w'; }

    @Override
    public String toString() { return String.format("%016x %c %s", address, type, name); }
}
