package dev.kpemu.api;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.machine.Arch;

/**
 * What a handler sees at a hit: the trapped registers ({@code struct pt_regs}), the probed
 * function's arguments by position and — from the kernel's BTF — by name, guest memory and
 * strings (kernel and user, read as the kernel's nofault accessors read them: a read the MMU
 * would refuse gives an empty result, never a made-up value), the current task, the exact guest
 * time and the stack. Valid only during the handler call; one context object is reused.
 */
public interface ProbeContext {
    /** The probe that hit. */
    Probe probe();

    Arch arch();

    // ---- registers and arguments ---------------------------------------------------------

    /** {@code instruction_pointer(regs)}: x86 pre handlers see the probe address + 1, as in Linux. */
    long ip();

    long sp();

    /** A register by its kernel name (x86-64 {@code rax … r15, rip, rflags}; arm64 {@code x0 … x30, sp, pc, pstate}). */
    long reg(String name);

    /** Writes a register of the trapped CPU (the guest goes on with it). */
    void setReg(String name, long value);

    /** Every register, by name, in the arch's order. */
    Map<String, Long> registers();

    /**
     * The {@code n}-th (0-based) argument at the function's entry, by the calling convention
     * ({@code regs_get_kernel_argument}: x86-64 rdi, rsi, rdx, rcx, r8, r9, then the stack; arm64 x0–x7).
     */
    long arg(int n);

    /**
     * The argument named {@code name} in the probed function's BTF prototype (a probe at a
     * function's entry). IllegalArgumentException when the kernel's BTF has no such parameter.
     */
    long arg(String name);

    /** The probed function's parameter names from the kernel's BTF (empty without BTF). */
    List<String> argNames();

    /** The parameters' C types from the kernel's BTF, in order ({@code int}, {@code const char *}, ...; empty without BTF). */
    List<String> argTypes();

    /**
     * A member of the struct the pointer argument {@code arg} points to, by its BTF path
     * ({@code flags}, {@code f_path.dentry}, {@code regs[0]}; pointers inside the path are not
     * followed), read zero-extended from guest memory as trace_kprobe's {@code arg->member} does;
     * empty on a fault. IllegalArgumentException when the BTF has no such parameter or member, the
     * parameter is no pointer to a struct or union, or the member is a bitfield.
     */
    OptionalLong field(String arg, String path);

    /** A kretprobe's return handler: {@code regs_return_value} (x86 rax, arm64 x0). IllegalStateException elsewhere. */
    long returnValue();

    // ---- memory ---------------------------------------------------------------------------

    /** {@code copy_from_kernel_nofault}: empty when the MMU would refuse (unmapped, or a user address). */
    Optional<byte[]> readKernel(long address, int length);

    /** {@code copy_from_user_nofault}: empty for kernel addresses and unmapped user pages. */
    Optional<byte[]> readUser(long address, int length);

    /** 8 bytes, little-endian, read as trace_kprobe's memory fetch does (user below TASK_SIZE, else kernel). */
    OptionalLong readLong(long address);

    /** {@code strncpy_from_kernel_nofault} (at most 4096 bytes, as kprobe_events' strings); empty on a fault. */
    Optional<String> kernelString(long address);

    /** {@code strncpy_from_user_nofault} (at most 4096 bytes); empty on a fault. */
    Optional<String> userString(long address);

    /** A string as kprobe_events' {@code :string} fetches it: a user string below TASK_SIZE, else a kernel string. */
    Optional<String> string(long address);

    /*
     * The strings above and comm() carry the guest's bytes losslessly: UTF-8 as text, any other
     * byte as the lone surrogate U+DC80..U+DCFF (GuestText); the *Bytes methods give the bytes.
     */

    /** {@link #kernelString}'s bytes, as the guest holds them (no NUL). */
    default Optional<byte[]> kernelStringBytes(long address) { return kernelString(address).map(GuestText::encode); }

    /** {@link #userString}'s bytes, as the guest holds them (no NUL). */
    default Optional<byte[]> userStringBytes(long address) { return userString(address).map(GuestText::encode); }

    /** {@link #string}'s bytes, as the guest holds them (no NUL). */
    default Optional<byte[]> stringBytes(long address) { return string(address).map(GuestText::encode); }

    // ---- task, time, stack ---------------------------------------------------------------

    /** {@code current->comm}, empty when the task cannot be read (bytes that are not UTF-8: {@link #commBytes}). */
    String comm();

    /** {@code current->comm}'s bytes (no NUL), as the trace prints them. */
    default byte[] commBytes() { return GuestText.encode(comm()); }

    /** {@code current->pid} (the thread id), 0 when unknown. */
    int pid();

    /** {@code current->tgid} (the process id), 0 when unknown. */
    int tgid();

    /**
     * {@code smp_processor_id()}: the CPU that hit (the vCPU whose engine trapped, 0 to N - 1), as
     * the trace's cpu column shows it; 0 on a machine with one vCPU.
     */
    int cpu();

    /** {@code current} ({@code struct task_struct *}), 0 when unknown. */
    long currentTask();

    /** Guest time in nanoseconds at this hit, exact to the instruction (not the clock's slice steps). */
    long nanos();

    /**
     * The stack as the kernel's unwinder gives it: the ip, then the return addresses of the
     * frame-pointer chain (a kretprobe trampoline replaced by the real return address).
     */
    List<Long> stackTrace();

    /** {@code %pS}: {@code do_sys_openat2+0x0/0x190}, or {@code 0x...} when no symbol covers it. */
    String symbolize(long address);

    // ---- per-instance data and control --------------------------------------------------

    /** A kretprobe's per-instance data ({@code ri->data}): what the entry handler stored, in the return handler; null if none. */
    <T> T data();

    /** Stores per-instance data in a kretprobe's entry handler, for its return handler. IllegalStateException for a kprobe. */
    void setData(Object value);

    /** In a kretprobe's entry handler: do not track this invocation (the entry handler's non-zero return in Linux). */
    void skipInstance();

    /** Stops the guest at the end of the current slice; the session ends with {@link Outcome#STOPPED}. */
    void stopGuest(String why);
}
