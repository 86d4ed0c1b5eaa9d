package dev.kpemu.kprobes;

/** The kernel errno values kprobe and uprobe definitions can fail with (include/uapi/asm-generic/errno*.h). */
public enum Errno {
    ENOENT(2), E2BIG(7), ENOMEM(12), EBUSY(16), EEXIST(17), ENOTDIR(20), EINVAL(22), ENOSPC(28), ERANGE(34),
    ELOOP(40), EILSEQ(84), EOPNOTSUPP(95), EADDRNOTAVAIL(99);

    private final int value;

    Errno(int value) { this.value = value; }

    /** The positive errno number; the kernel's functions return its negation. */
    public int value() { return value; }
}
