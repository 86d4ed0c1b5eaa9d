package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The register names {@code %REG} accepts on one architecture, exactly as the kernel's
 * {@code regs_query_register_offset} table ({@code arch/x86/kernel/ptrace.c},
 * {@code arch/arm64/kernel/ptrace.c}), each with its slot in {@code struct pt_regs}
 * (byte offset / 8). Also the calling convention behind {@code $argN}, {@code $retval}
 * and {@code $stackN}.
 */
public final class RegisterSet {
    /** One accepted name and its pt_regs slot (several names may share a slot, e.g. arm64 {@code lr}/{@code x30}). */
    public record Register(String name, int slot) {
        /** Byte offset in {@code struct pt_regs}. */
        public int ptRegsOffset() { return slot * 8; }
    }

    /** {@code THREAD_SIZE} of both Debian kernels (16 KiB). */
    public static final int THREAD_SIZE = 16384;
    /** {@code PARAM_MAX_STACK}: the largest N of {@code $stackN} and {@code $argN}. */
    public static final int PARAM_MAX_STACK = THREAD_SIZE / 8;

    private static final RegisterSet X86_64;
    private static final RegisterSet ARM64;

    static {
        // struct pt_regs (x86-64): r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss
        String[] x86Slots = {"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8",
                "ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss"};
        Map<String, Integer> slot = new LinkedHashMap<>();
        for (int i = 0; i < x86Slots.length; i++) slot.put(x86Slots[i], i);
        // table order of regoffset_table[] on x86-64
        String[] x86Table = {"r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8",
                "bx", "cx", "dx", "si", "di", "bp", "ax", "orig_ax", "ip", "cs", "flags", "sp", "ss"};
        Map<String, Register> x86 = new LinkedHashMap<>();
        for (String n : x86Table) x86.put(n, new Register(n, slot.get(n)));
        X86_64 = new RegisterSet(Arch.X86_64, x86,
                new int[] {slot.get("di"), slot.get("si"), slot.get("dx"), slot.get("cx"), slot.get("r8"), slot.get("r9")},
                slot.get("ax"), slot.get("sp"), slot.get("ip"));

        // struct pt_regs (arm64): regs[31], sp, pc, pstate
        Map<String, Register> a64 = new LinkedHashMap<>();
        for (int i = 0; i <= 30; i++) a64.put("x" + i, new Register("x" + i, i));
        a64.put("lr", new Register("lr", 30));
        a64.put("sp", new Register("sp", 31));
        a64.put("pc", new Register("pc", 32));
        a64.put("pstate", new Register("pstate", 33));
        ARM64 = new RegisterSet(Arch.ARM64, a64, new int[] {0, 1, 2, 3, 4, 5, 6, 7}, 0, 31, 32);
    }

    private final Arch arch;
    private final Map<String, Register> byName;
    private final int[] argumentSlots;
    private final int returnValueSlot;
    private final int stackPointerSlot;
    private final int pcSlot;

    private RegisterSet(Arch arch, Map<String, Register> byName, int[] argumentSlots,
                        int returnValueSlot, int stackPointerSlot, int pcSlot) {
        this.arch = arch;
        this.byName = Map.copyOf(byName);
        this.names = List.copyOf(byName.keySet());
        this.argumentSlots = argumentSlots;
        this.returnValueSlot = returnValueSlot;
        this.stackPointerSlot = stackPointerSlot;
        this.pcSlot = pcSlot;
    }

    private final List<String> names;

    public static RegisterSet of(Arch arch) {
        return switch (arch) {
            case X86_64 -> X86_64;
            case ARM64 -> ARM64;
        };
    }

    public Arch arch() { return arch; }

    /** The register for {@code %name} (case-sensitive), or null when the kernel rejects the name. */
    public Register lookup(String name) { return byName.get(name); }

    /** All accepted names in the kernel table's order. */
    public List<String> names() { return names; }

    /** Number of pt_regs slots a {@link FetchContext} must serve (21 on x86-64, 34 on arm64). */
    public int slotCount() { return arch == Arch.X86_64 ? 21 : 34; }

    /** Number of arguments passed in registers ({@code NR_REG_ARGUMENTS}: 6 on x86-64, 8 on arm64). */
    public int registerArguments() { return argumentSlots.length; }

    /** pt_regs slot of the 0-based argument {@code n} &lt; {@link #registerArguments()}. */
    public int argumentSlot(int n) { return argumentSlots[n]; }

    /** Slot {@code regs_return_value} reads ({@code ax} / {@code x0}). */
    public int returnValueSlot() { return returnValueSlot; }

    /** Slot of the saved stack pointer ({@code kernel_stack_pointer}). */
    public int stackPointerSlot() { return stackPointerSlot; }

    /** Slot of the instruction pointer. */
    public int pcSlot() { return pcSlot; }

    /** Whether arguments past the register ones come from the stack (x86-64) or read as 0 (arm64). */
    public boolean stackArguments() { return arch == Arch.X86_64; }
}
