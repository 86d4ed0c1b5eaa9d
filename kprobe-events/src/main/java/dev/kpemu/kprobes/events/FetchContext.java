package dev.kpemu.kprobes.events;

/**
 * The probe hit as the fetch plans see it: the saved registers ({@code struct pt_regs}),
 * guest memory through the guest's page tables, and the current task. The engine implements
 * it once per hit (or reuses one mutable instance); plans never retain it.
 *
 * <p>Memory reads must behave like the kernel's nofault accessors: {@link #readKernel} fails
 * (returns false) for unmapped addresses <em>and</em> for user-space addresses (x86-64's
 * {@code copy_from_kernel_nofault_allowed}; arm64's PAN), {@link #readUser} fails for
 * kernel addresses and unmapped user pages. A failed read leaves the destination untouched.
 */
public interface FetchContext {
    /** The value of pt_regs slot {@code slot} (see {@link RegisterSet.Register#slot()}). */
    long register(int slot);

    /** {@code kernel_stack_pointer(regs)}. */
    long stackPointer();

    /** Copies {@code len} bytes of kernel memory at {@code address}; false on a fault. */
    boolean readKernel(long address, byte[] dst, int offset, int len);

    /** Copies {@code len} bytes of user memory at {@code address}; false on a fault. */
    boolean readUser(long address, byte[] dst, int offset, int len);

    /**
     * {@code strncpy_from_kernel_nofault}: copies a NUL-terminated string of at most
     * {@code max} bytes including the NUL (truncating and terminating a longer one) and
     * returns the bytes stored including the NUL, or -1 on a fault.
     */
    default int readKernelString(long address, byte[] dst, int offset, int max) {
        return copyString(address, dst, offset, max, false);
    }

    /** {@code strncpy_from_user_nofault}, same contract as {@link #readKernelString}. */
    default int readUserString(long address, byte[] dst, int offset, int max) {
        return copyString(address, dst, offset, max, true);
    }

    /**
     * {@code TASK_SIZE}: addresses below it belong to user space. 0 when the context has no user
     * space of its own (then kernel fetches never fall back to user reads).
     */
    default long taskSize() { return 0; }

    /**
     * trace_kprobe's {@code probe_mem_read}: a "kernel" fetch of an address below
     * {@link #taskSize()} reads user memory (x86-64 and arm64 have non-overlapping address
     * spaces: CONFIG_ARCH_HAS_NON_OVERLAPPING_ADDRESS_SPACE), anything else kernel memory.
     */
    default boolean readProbeMemory(long address, byte[] dst, int offset, int len) {
        return Long.compareUnsigned(address, taskSize()) < 0 ? readUser(address, dst, offset, len) : readKernel(address, dst, offset, len);
    }

    /** trace_kprobe's {@code fetch_store_string}: a user string below {@link #taskSize()}, else a kernel string. */
    default int readProbeString(long address, byte[] dst, int offset, int max) {
        return Long.compareUnsigned(address, taskSize()) < 0 ? readUserString(address, dst, offset, max) : readKernelString(address, dst, offset, max);
    }

    /** A wprobe's {@code $addr}: the watched address ({@code tw->addr}); 0 outside a wprobe hit. */
    default long watchAddress() { return 0; }

    /** The current task's {@code comm} (at most 15 bytes, no NUL). */
    byte[] comm();

    /** The kernel's symbols, for {@code symstr}. */
    KernelSymbols symbols();

    private int copyString(long address, byte[] dst, int offset, int max, boolean user) {
        if (max <= 0) return 0;
        int n = 0;
        while (true) {
            boolean ok = user ? readUser(address + n, dst, offset + n, 1) : readKernel(address + n, dst, offset + n, 1);
            if (!ok) {
                dst[offset] = 0;
                return -1;
            }
            n++;
            if (dst[offset + n - 1] == 0) return n;
            if (n >= max) {
                dst[offset + n - 1] = 0;
                return n;
            }
        }
    }
}
