package dev.kpemu.unicorn;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.natives.NativeLibraries;

/**
 * Java 25 FFM binding of Unicorn 2.1.4 (Debian unstable's libunicorn2t64): one emulator instance
 * ({@code uc_engine}). Notes below that name 2.1.1 were measured there and re-checked on 2.1.4
 * (docs/x86-boot-notes.md).
 *
 * <p>Not thread-safe: an instance is used from the thread that runs it, and hooks are called on
 * that thread. Every upcall catches everything: a throwable escaping a hook is recorded, the
 * engine is stopped, and {@link #start} rethrows it as a {@link HookFailedException} once
 * {@code uc_emu_start} has returned (an exception escaping an FFM upcall would kill the JVM).
 */
public final class Unicorn implements AutoCloseable {
    // --- architecture and mode (unicorn.h) ---
    public static final int ARCH_ARM64 = 2;
    public static final int ARCH_X86 = 4;
    public static final int MODE_ARM = 0;
    public static final int MODE_64 = 1 << 3;

    // --- memory permissions ---
    public static final int PROT_NONE = 0, PROT_READ = 1, PROT_WRITE = 2, PROT_EXEC = 4, PROT_ALL = 7;

    // --- hook types ---
    public static final int HOOK_INTR = 1, HOOK_INSN = 1 << 1, HOOK_CODE = 1 << 2, HOOK_BLOCK = 1 << 3;
    public static final int HOOK_MEM_READ_UNMAPPED = 1 << 4, HOOK_MEM_WRITE_UNMAPPED = 1 << 5,
            HOOK_MEM_FETCH_UNMAPPED = 1 << 6, HOOK_MEM_READ_PROT = 1 << 7, HOOK_MEM_WRITE_PROT = 1 << 8,
            HOOK_MEM_FETCH_PROT = 1 << 9, HOOK_MEM_READ = 1 << 10, HOOK_MEM_WRITE = 1 << 11,
            HOOK_MEM_FETCH = 1 << 12, HOOK_MEM_READ_AFTER = 1 << 13, HOOK_INSN_INVALID = 1 << 14,
            HOOK_EDGE_GENERATED = 1 << 15;
    public static final int HOOK_MEM_UNMAPPED = HOOK_MEM_READ_UNMAPPED | HOOK_MEM_WRITE_UNMAPPED | HOOK_MEM_FETCH_UNMAPPED;
    public static final int HOOK_MEM_PROT = HOOK_MEM_READ_PROT | HOOK_MEM_WRITE_PROT | HOOK_MEM_FETCH_PROT;
    public static final int HOOK_MEM_INVALID = HOOK_MEM_UNMAPPED | HOOK_MEM_PROT;

    // --- memory access types reported to memory hooks ---
    public static final int MEM_READ = 16, MEM_WRITE = 17, MEM_FETCH = 18, MEM_READ_UNMAPPED = 19,
            MEM_WRITE_UNMAPPED = 20, MEM_FETCH_UNMAPPED = 21, MEM_WRITE_PROT = 22, MEM_READ_PROT = 23,
            MEM_FETCH_PROT = 24, MEM_READ_AFTER = 25;

    // --- instruction hook ids ---
    public static final int X86_INS_IN = 218, X86_INS_OUT = 500, X86_INS_SYSCALL = 699, X86_INS_CPUID = 113,
            X86_INS_RDTSC = 608, X86_INS_RDTSCP = 609;
    public static final int ARM64_INS_MRS = 1, ARM64_INS_MSR = 2, ARM64_INS_SYS = 3, ARM64_INS_SYSL = 4;

    // --- CPU models ---
    public static final int CPU_ARM64_A57 = 0, CPU_ARM64_A53 = 1, CPU_ARM64_A72 = 2, CPU_ARM64_MAX = 3;
    /**
     * x86 CPU models (uc_cpu_x86). Unicorn 2.1.1 opened x86-64 engines as qemu64; 2.1.4 opens them
     * as a Haswell-like model (family 6 model 0x3c, RDRAND, BMI, AVX2 bits): name the model.
     */
    public static final int CPU_X86_QEMU64 = 0, CPU_X86_HASWELL = 19, CPU_X86_OPTERON_G1 = 30, CPU_X86_SKYLAKE_CLIENT = 21;

    // --- uc_ctl ---
    private static final int CTL_IO_WRITE = 1, CTL_IO_READ = 2;
    private static final int CTL_EXITS = 6;
    private static final int CTL_USE_EXITS = 4, CTL_CPU_MODEL = 7, CTL_TB_REQUEST_CACHE = 8, CTL_TB_REMOVE_CACHE = 9,
            CTL_TB_FLUSH = 10, CTL_TLB_FLUSH = 11, CTL_TCG_BUFFER_SIZE = 13;

    private static int ctl(int type, int nr, int rw) {
        return type | (nr << 26) | (rw << 30);
    }

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIB = NativeLibraries.load(NativeLibraries.UNICORN);
    private static final Linker.Option CRITICAL = Linker.Option.critical(false);

    private static MethodHandle fn(String name, FunctionDescriptor fd, Linker.Option... opts) {
        MemorySegment sym = LIB.find(name).orElseThrow(() -> new UnicornException(-1, "symbol " + name + " missing in libunicorn"));
        return LINKER.downcallHandle(sym, fd, opts);
    }

    private static final MethodHandle UC_VERSION = fn("uc_version", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle UC_OPEN = fn("uc_open", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle UC_CLOSE = fn("uc_close", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle UC_STRERROR = fn("uc_strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    // The register calls take the value buffer's address as a plain word, not a segment: a segment
    // of the engine's shared arena costs every call the session's acquire and release (two atomic
    // updates; measured with `kpemu bench unicorn`, x86 register read 0.063 -> 0.055 µs).
    // The buffers live as long as the engine (its arena); each call touches its buffer first, which
    // fails once the arena is closed.
    private static final MethodHandle UC_REG_READ = fn("uc_reg_read", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), CRITICAL);
    private static final MethodHandle UC_REG_WRITE = fn("uc_reg_write", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG), CRITICAL);
    private static final MethodHandle UC_REG_READ_BATCH = fn("uc_reg_read_batch", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT), CRITICAL);
    private static final MethodHandle UC_MEM_READ = fn("uc_mem_read", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG));
    private static final MethodHandle UC_MEM_WRITE = fn("uc_mem_write", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG));
    private static final MethodHandle UC_MEM_MAP = fn("uc_mem_map", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle UC_MEM_MAP_PTR = fn("uc_mem_map_ptr", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT, ADDRESS));
    private static final MethodHandle UC_MEM_UNMAP = fn("uc_mem_unmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle UC_MEM_PROTECT = fn("uc_mem_protect", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle UC_MMIO_MAP = fn("uc_mmio_map",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle UC_EMU_START = fn("uc_emu_start", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle UC_EMU_STOP = fn("uc_emu_stop", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle UC_HOOK_ADD = fn("uc_hook_add",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG),
            Linker.Option.firstVariadicArg(7));
    private static final MethodHandle UC_HOOK_ADD_INSN = fn("uc_hook_add",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT),
            Linker.Option.firstVariadicArg(7));
    private static final MethodHandle UC_HOOK_DEL = fn("uc_hook_del", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle UC_CONTEXT_ALLOC = fn("uc_context_alloc", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle UC_CONTEXT_SIZE = fn("uc_context_size", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    private static final MethodHandle UC_CONTEXT_SAVE = fn("uc_context_save", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle UC_CONTEXT_RESTORE = fn("uc_context_restore", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle UC_CONTEXT_FREE = fn("uc_context_free", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle UC_CTL_0 = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle UC_CTL_PTR = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle UC_CTL_INT = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle UC_CTL_LONG_LONG = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG, JAVA_LONG), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle UC_CTL_PTR_LONG = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle UC_CTL_LONG_PTR = fn("uc_ctl", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG, ADDRESS), Linker.Option.firstVariadicArg(2));

    // --- upcall descriptors ---
    /**
     * The interrupt hook's {@code (uc_engine *, uint32_t, void *)} with the pointers as 64-bit
     * integers (the same registers in both arches' calling conventions): a pointer parameter makes
     * the upcall allocate a MemorySegment for each, on every guest exception and kprobe hit, and
     * the hook reads neither.
     */
    private static final FunctionDescriptor CB_INTR = FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor CB_CODE = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS);
    private static final FunctionDescriptor CB_MEM = FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG, ADDRESS);
    private static final FunctionDescriptor CB_MEM_EVENT = FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG, ADDRESS);
    private static final FunctionDescriptor CB_INSN_INVALID = FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS, ADDRESS);
    private static final FunctionDescriptor CB_IN = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS);
    private static final FunctionDescriptor CB_OUT = FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS);
    private static final FunctionDescriptor CB_SYSCALL = FunctionDescriptor.ofVoid(ADDRESS, ADDRESS);
    private static final FunctionDescriptor CB_CPUID = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
    // uc_arm64_cp_reg (32 bytes) as a sized segment: no MemorySegment.reinterpret per call, a
    // restricted method whose caller check walked the Java stack at every MRS/MSR upcall.
    private static final FunctionDescriptor CB_ARM64_SYS = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT,
            ADDRESS.withTargetLayout(java.lang.foreign.MemoryLayout.sequenceLayout(32, JAVA_BYTE)), ADDRESS);
    private static final FunctionDescriptor CB_MMIO_READ = FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS);
    private static final FunctionDescriptor CB_MMIO_WRITE = FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG, JAVA_INT, JAVA_LONG, ADDRESS);

    private static final MethodHandle ON_INTR, ON_CODE, ON_MEM, ON_MEM_EVENT, ON_INSN_INVALID, ON_IN, ON_OUT,
            ON_SYSCALL, ON_CPUID, ON_ARM64_SYS, ON_MMIO_READ, ON_MMIO_WRITE;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            ON_INTR = l.findVirtual(Unicorn.class, "onIntr", MethodType.methodType(void.class, IntrHook.class, long.class, int.class, long.class));
            ON_CODE = l.findVirtual(Unicorn.class, "onCode", MethodType.methodType(void.class, CodeHook.class, MemorySegment.class, long.class, int.class, MemorySegment.class));
            ON_MEM = l.findVirtual(Unicorn.class, "onMem", MethodType.methodType(void.class, MemHook.class, MemorySegment.class, int.class, long.class, int.class, long.class, MemorySegment.class));
            ON_MEM_EVENT = l.findVirtual(Unicorn.class, "onMemEvent", MethodType.methodType(boolean.class, MemEventHook.class, MemorySegment.class, int.class, long.class, int.class, long.class, MemorySegment.class));
            ON_INSN_INVALID = l.findVirtual(Unicorn.class, "onInsnInvalid", MethodType.methodType(boolean.class, InvalidInsnHook.class, MemorySegment.class, MemorySegment.class));
            ON_IN = l.findVirtual(Unicorn.class, "onIn", MethodType.methodType(int.class, PortInHook.class, MemorySegment.class, int.class, int.class, MemorySegment.class));
            ON_OUT = l.findVirtual(Unicorn.class, "onOut", MethodType.methodType(void.class, PortOutHook.class, MemorySegment.class, int.class, int.class, int.class, MemorySegment.class));
            ON_SYSCALL = l.findVirtual(Unicorn.class, "onSyscall", MethodType.methodType(void.class, SyscallHook.class, MemorySegment.class, MemorySegment.class));
            ON_CPUID = l.findVirtual(Unicorn.class, "onCpuid", MethodType.methodType(int.class, CpuidHook.class, MemorySegment.class, MemorySegment.class));
            ON_ARM64_SYS = l.findVirtual(Unicorn.class, "onArm64Sys", MethodType.methodType(int.class, SysRegHook.class, MemorySegment.class, int.class, MemorySegment.class, MemorySegment.class));
            ON_MMIO_READ = l.findVirtual(Unicorn.class, "onMmioRead", MethodType.methodType(long.class, MmioReadHandler.class, MemorySegment.class, long.class, int.class, MemorySegment.class));
            ON_MMIO_WRITE = l.findVirtual(Unicorn.class, "onMmioWrite", MethodType.methodType(void.class, MmioWriteHandler.class, MemorySegment.class, long.class, int.class, long.class, MemorySegment.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int arch;
    private final MemorySegment uc;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment scratch;      // 64 bytes for register values and small structs
    private final long scratchAddress;        // its address, for the register calls
    private final MemorySegment ioBuffer;     // reusable buffer for memory reads/writes
    private final Map<Long, Hook> hooks = new LinkedHashMap<>();
    private final List<Arena> mmioArenas = new ArrayList<>();
    private Throwable hookFailure;
    private boolean closed;
    private int codeRange = -1;        // the CodePlacement range holding the translation buffer, -1: none

    private Unicorn(int arch, MemorySegment uc) {
        this.arch = arch;
        this.uc = uc;
        this.scratch = arena.allocate(64, 16);
        this.scratchAddress = scratch.address();
        this.ioBuffer = arena.allocate(1 << 16, 16);
    }

    /** Opens an engine of Unicorn's default CPU model: {@code open(ARCH_X86, MODE_64)} or {@code open(ARCH_ARM64, MODE_ARM)}. */
    public static Unicorn open(int arch, int mode) {
        return open(arch, mode, -1);
    }

    /**
     * Opens an engine of CPU model {@code cpuModel} (-1: Unicorn's default) and initializes it, its
     * translation buffer of {@link CodePlacement#BUFFER_BYTES} mapped within a direct call of the
     * native code it calls ({@link CodePlacement}).
     */
    public static Unicorn open(int arch, int mode, int cpuModel) {
        java.util.List<Unicorn> unplaced = new java.util.ArrayList<>();
        try {
            for (int attempt = 1; ; attempt++) {
                Unicorn u = openOnce(arch, mode, cpuModel);
                if (u.codePlaced() || !u.placementRaced || attempt == PLACEMENT_ATTEMPTS) return u;
                // the kernel put the buffer in a free range above the one freed for it (memory unmapped since
                // the ranges were reserved: a closed machine's RAM), or another thread's mapping took the freed
                // range first: open it again while this one's buffer holds that place
                unplaced.add(u);
            }
        } finally {
            for (Unicorn u : unplaced) u.close();
        }
    }

    /** Engines opened at most, while each one's buffer lands outside the range freed for it, before one runs unplaced. */
    static final int PLACEMENT_ATTEMPTS = 8;

    /** A range was freed for this engine's buffer and the buffer landed elsewhere. */
    private boolean placementRaced;

    private static Unicorn openOnce(int arch, int mode, int cpuModel) {
        Unicorn u;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check((int) UC_OPEN.invokeExact(arch, mode, out), "uc_open");
            u = new Unicorn(arch, out.get(ADDRESS, 0));
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, "uc_open: " + t);
        }
        try {
            u.ctlInt(ctl(CTL_TCG_BUFFER_SIZE, 1, CTL_IO_WRITE), (int) CodePlacement.BUFFER_BYTES, "uc_ctl(TCG_BUFFER_SIZE)");
            if (cpuModel >= 0) u.setCpuModel(cpuModel);
            synchronized (CodePlacement.class) {   // engines opened at once would map their buffers into each other's ranges
                u.codeRange = CodePlacement.release();
                u.initialize();
                if (!CodePlacement.settle(u.codeRange)) {
                    u.placementRaced = u.codeRange >= 0;
                    u.codeRange = -1;
                }
            }
            if (TRACE_PLACEMENT) System.err.println("kpemu: engine opened, translation buffer " + (u.codePlaced() ? "placed" : "not placed") + "; " + codePlacement());
            return u;
        } catch (RuntimeException e) {
            u.close();
            throw e;
        }
    }

    private static final boolean TRACE_PLACEMENT = Boolean.getBoolean("kpemu.trace.codePlacement");

    /** Makes Unicorn initialize the engine now (its first control read does): the translation buffer is mapped here. */
    private void initialize() {
        try {
            check((int) UC_CTL_PTR.invokeExact(uc, ctl(CTL_TCG_BUFFER_SIZE, 1, CTL_IO_READ), scratch), "uc_ctl(TCG_BUFFER_SIZE)");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** Whether this engine's translation buffer lies in a range {@link CodePlacement} reserved near the native code. */
    public boolean codePlaced() { return codeRange >= 0; }

    /** The {@link CodePlacement} range holding the translation buffer, -1 when none does. */
    int codeRange() { return codeRange; }

    /**
     * How engines' translation buffers were placed in this process: ranges reserved, engines whose
     * buffer is in one, engines whose buffer the kernel put elsewhere.
     */
    public static String codePlacement() {
        return CodePlacement.reservedRanges() + " ranges reserved for " + (CodePlacement.BUFFER_BYTES >> 20)
                + " MiB buffers; " + CodePlacement.placed() + " engines placed in them, " + CodePlacement.elsewhere() + " elsewhere";
    }

    /** The library's version as "major.minor.patch" (2.x packs it as major<<24 | minor<<16 | patch<<8). */
    public static String version() {
        try {
            int v = (int) UC_VERSION.invokeExact(MemorySegment.NULL, MemorySegment.NULL);
            return ((v >>> 24) & 0xff) + "." + ((v >> 16) & 0xff) + "." + ((v >> 8) & 0xff);
        } catch (Throwable t) {
            throw new UnicornException(-1, "uc_version: " + t);
        }
    }

    public int arch() { return arch; }

    // ------------------------------------------------------------------ errors

    static String strerror(int err) {
        try {
            MemorySegment s = (MemorySegment) UC_STRERROR.invokeExact(err);
            return s.reinterpret(512).getString(0);
        } catch (Throwable t) {
            return "unicorn error " + err;
        }
    }

    static void check(int err, String what) {
        if (err != 0) throw new UnicornException(err, what + ": " + strerror(err) + " (UC_ERR " + err + ")");
    }

    private void ensureOpen() {
        if (closed) throw new IllegalStateException("unicorn engine already closed");
    }

    // ------------------------------------------------------------------ control

    /** Sets the CPU model (before Unicorn initializes the engine: {@link #open(int, int, int)} does it). */
    private void setCpuModel(int model) {
        ctlInt(ctl(CTL_CPU_MODEL, 1, CTL_IO_WRITE), model, "uc_ctl(CPU_MODEL)");
    }

    /**
     * Switches to the exits list (UC_CTL_UC_USE_EXITS): {@code until} of {@link #start} is then
     * ignored and, with no exits registered, nothing is invalidated when a run returns. Needed on
     * x86 with guest paging: 2.1.1 invalidates the block at {@code until - 1} on every return by
     * translating that virtual address, and when the current page tables do not map it
     * executable the failed walk sets CR2 and the "exception in flight" state (and a run whose
     * {@code until} is unmapped does not start at all).
     */
    public void useExits(boolean on) {
        ctlInt(ctl(CTL_USE_EXITS, 1, CTL_IO_WRITE), on ? 1 : 0, "uc_ctl(USE_EXITS)");
        exitsMode = on;
    }

    private boolean exitsMode;
    private long currentExit = Long.MIN_VALUE;

    /** In exits mode: a canonical x86-64 {@code until} becomes the one exit; a non-canonical one means none. */
    private void setExitFor(long until) {
        long exit = (until >> 47) == 0 || (until >> 47) == -1 ? until : Long.MIN_VALUE;
        if (exit == currentExit) return;
        int n = (exit == Long.MIN_VALUE ? 0 : 1) + extraExits.length;
        try (Arena a = n <= 8 ? null : Arena.ofConfined()) {
            MemorySegment list = a == null ? scratch : a.allocate(8L * n, 8);
            int i = 0;
            if (exit != Long.MIN_VALUE) list.setAtIndex(JAVA_LONG, i++, exit);
            for (long e : extraExits) list.setAtIndex(JAVA_LONG, i++, e);
            check((int) UC_CTL_PTR_LONG.invokeExact(uc, ctl(CTL_EXITS, 2, CTL_IO_WRITE), list, (long) n), "uc_ctl(EXITS)");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        currentExit = exit;
    }

    /**
     * In exits mode: stop also at {@code exits}, with every run's {@code until} (UC_CTL_UC_EXITS).
     * Unicorn checks the list when it translates an instruction: a block ends before an exit and the
     * run returns with the pc at it, mid-block included; a block translated before the exit was
     * added does not see it until it is dropped (UnicornExitsTest).
     */
    public void setExits(long... exits) {
        ensureOpen();
        if (!exitsMode) throw new IllegalStateException("setExits needs useExits(true)");
        extraExits = exits.clone();
        long until = currentExit;
        currentExit = Long.MIN_VALUE + 1;   // rewrite the list
        setExitFor(until == Long.MIN_VALUE + 1 ? Long.MIN_VALUE : until);
    }

    /** The exits of {@link #setExits}. */
    private long[] extraExits = {};

    /** The offset of the engine flag that leaves guest loads and stores without an exit check ({@link AccessExitFlag}); -1: unknown. */
    private static final long ACCESS_EXIT_FLAG = AccessExitFlag.find(LIB);
    /** Hook types whose callbacks run inside a block and may stop the engine there (an unmapped fetch ends its block by itself). */
    private static final int HOOKS_STOPPING_INSIDE = HOOK_CODE | (HOOK_MEM_INVALID & ~HOOK_MEM_FETCH_UNMAPPED)
            | HOOK_MEM_READ | HOOK_MEM_WRITE | HOOK_MEM_FETCH | HOOK_MEM_READ_AFTER;
    private boolean exitAfterAccess = true, exitAfterAccessApplied = true, flushAfterRun, running;
    /** Hooks of {@link #HOOKS_STOPPING_INSIDE}: while there are any, blocks keep the check. */
    private int hooksStoppingInside;

    /** Whether this libunicorn lets an engine leave out its exit check after guest loads and stores ({@link AccessExitFlag}). */
    public static boolean exitAfterAccessControllable() { return ACCESS_EXIT_FLAG >= 0; }

    private static final MemorySegment TLB_SET_DIRTY_X86 = TlbSetDirty.function(LIB);
    private static final long ENGINE_CPU = TlbSetDirty.engineCpuOffset(LIB);

    /**
     * Unicorn's {@code tlb_set_dirty} for x86-64 engines and the offset of the CPU pointer in the
     * engine state it takes ({@link TlbSetDirty}), or empty when this libunicorn does not show them.
     */
    public static java.util.Optional<TlbSetDirtyCall> tlbSetDirtyX86() {
        if (TLB_SET_DIRTY_X86.equals(MemorySegment.NULL) || ENGINE_CPU < 0) return java.util.Optional.empty();
        return java.util.Optional.of(new TlbSetDirtyCall(TLB_SET_DIRTY_X86, ENGINE_CPU));
    }

    /** {@code tlb_set_dirty_<arch>(CPUState *, vaddr)} and where an engine's state keeps its CPU pointer. */
    public record TlbSetDirtyCall(MemorySegment function, long engineCpuOffset) {}

    /**
     * Whether a stop asked for during a guest load or store (a memory hook's {@link #stop}, a
     * failed store) ends the translated block right after that access, Unicorn's default at the
     * price of a helper call after every load and store, or only at the next block start, as QEMU
     * does ({@link AccessExitFlag}). Stops from block, interrupt and instruction hooks are where
     * they were either way. While the engine has a code or memory-access hook (whose callback may
     * stop it inside a block) its blocks keep the checks whatever this says. When the effective
     * choice changes, the engine's translated code is dropped (after the run, when it changes
     * inside one). Returns whether the engine does as asked: false when the flag's place is
     * unknown, and the engine keeps its checks.
     */
    public boolean setExitAfterAccess(boolean on) {
        exitAfterAccess = on;
        return applyExitAfterAccess() == (on || hooksStoppingInside > 0);
    }

    /** Whether blocks translated now check for a stop after each guest load and store. */
    public boolean exitsAfterAccess() { return exitAfterAccessApplied; }

    private boolean applyExitAfterAccess() {
        ensureOpen();
        boolean want = exitAfterAccess || hooksStoppingInside > 0;
        if (want == exitAfterAccessApplied || ACCESS_EXIT_FLAG < 0) return exitAfterAccessApplied;
        MemorySegment state = uc.reinterpret(ACCESS_EXIT_FLAG + 1);
        byte now = state.get(JAVA_BYTE, ACCESS_EXIT_FLAG);
        if (now != (exitAfterAccessApplied ? 0 : 1)) return exitAfterAccessApplied;   // not the flag as found: leave it alone
        state.set(JAVA_BYTE, ACCESS_EXIT_FLAG, (byte) (want ? 0 : 1));
        exitAfterAccessApplied = want;
        if (running) flushAfterRun = true;
        else flushTranslationCache();
        return want;
    }

    /** Drops every translated block. */
    public void flushTranslationCache() {
        ctl0(ctl(CTL_TB_FLUSH, 0, CTL_IO_WRITE), "uc_ctl(TB_FLUSH)");
    }

    /** Drops translated blocks in [begin, end) (guest virtual addresses). */
    public void removeTranslationCache(long begin, long end) {
        ensureOpen();
        try {
            check((int) UC_CTL_LONG_LONG.invokeExact(uc, ctl(CTL_TB_REMOVE_CACHE, 2, CTL_IO_WRITE), begin, end), "uc_ctl(TB_REMOVE_CACHE)");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** Drops the software TLB (needed after the host edits guest page tables). */
    public void flushTlb() {
        ctl0(ctl(CTL_TLB_FLUSH, 0, CTL_IO_WRITE), "uc_ctl(TLB_FLUSH)");
    }

    /** Translates (or looks up) the block at {@code address}; returns {@code {icount, size}}. */
    public int[] requestTranslationBlock(long address) {
        ensureOpen();
        try {
            MemorySegment tb = scratch;
            tb.fill((byte) 0);
            check((int) UC_CTL_LONG_PTR.invokeExact(uc, ctl(CTL_TB_REQUEST_CACHE, 2, CTL_IO_READ | CTL_IO_WRITE), address, tb), "uc_ctl(TB_REQUEST_CACHE)");
            return new int[] {Short.toUnsignedInt(tb.get(JAVA_SHORT, 8)), Short.toUnsignedInt(tb.get(JAVA_SHORT, 10))};
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    private void ctl0(int type, String what) {
        ensureOpen();
        try {
            check((int) UC_CTL_0.invokeExact(uc, type), what);
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, what + ": " + t);
        }
    }

    private void ctlInt(int type, int value, String what) {
        ensureOpen();
        try {
            check((int) UC_CTL_INT.invokeExact(uc, type, value), what);
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, what + ": " + t);
        }
    }

    // ------------------------------------------------------------------ memory

    public void memMap(long address, long size, int perms) {
        ensureOpen();
        try {
            check((int) UC_MEM_MAP.invokeExact(uc, address, size, perms),
                    "uc_mem_map(0x" + Long.toHexString(address) + ", 0x" + Long.toHexString(size) + ")");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** Maps host memory (which must outlive the mapping) as guest memory. */
    public void memMapPtr(long address, long size, int perms, MemorySegment host) {
        ensureOpen();
        if (host.byteSize() < size) throw new IllegalArgumentException("host segment smaller than mapping");
        try {
            check((int) UC_MEM_MAP_PTR.invokeExact(uc, address, size, perms, host),
                    "uc_mem_map_ptr(0x" + Long.toHexString(address) + ", 0x" + Long.toHexString(size) + ")");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    public void memUnmap(long address, long size) {
        ensureOpen();
        try {
            check((int) UC_MEM_UNMAP.invokeExact(uc, address, size), "uc_mem_unmap");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    public void memProtect(long address, long size, int perms) {
        ensureOpen();
        try {
            check((int) UC_MEM_PROTECT.invokeExact(uc, address, size, perms), "uc_mem_protect");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** Maps an MMIO region whose accesses go to the handlers (offsets are relative to {@code address}). */
    public void mmioMap(long address, long size, MmioReadHandler read, MmioWriteHandler write) {
        ensureOpen();
        Arena a = Arena.ofShared();
        MemorySegment r = LINKER.upcallStub(ON_MMIO_READ.bindTo(this).bindTo(read), CB_MMIO_READ, a);
        MemorySegment w = LINKER.upcallStub(ON_MMIO_WRITE.bindTo(this).bindTo(write), CB_MMIO_WRITE, a);
        try {
            check((int) UC_MMIO_MAP.invokeExact(uc, address, size, r, MemorySegment.NULL, w, MemorySegment.NULL), "uc_mmio_map");
        } catch (UnicornException e) {
            a.close();
            throw e;
        } catch (Throwable t) {
            a.close();
            throw new UnicornException(-1, t.toString());
        }
        mmioArenas.add(a);
    }

    /** Reads guest-physical memory (with paging on, Unicorn's memory API is physical). */
    public void memRead(long address, byte[] dst, int off, int len) {
        ensureOpen();
        int done = 0;
        while (done < len) {
            int n = (int) Math.min(len - done, ioBuffer.byteSize());
            readInto(address + done, ioBuffer, n);
            MemorySegment.copy(ioBuffer, JAVA_BYTE, 0, dst, off + done, n);
            done += n;
        }
    }

    public byte[] memRead(long address, int len) {
        byte[] b = new byte[len];
        memRead(address, b, 0, len);
        return b;
    }

    public void memWrite(long address, byte[] src, int off, int len) {
        ensureOpen();
        int done = 0;
        while (done < len) {
            int n = (int) Math.min(len - done, ioBuffer.byteSize());
            MemorySegment.copy(src, off + done, ioBuffer, JAVA_BYTE, 0, n);
            writeFrom(address + done, ioBuffer, n);
            done += n;
        }
    }

    public void memWrite(long address, byte[] src) {
        memWrite(address, src, 0, src.length);
    }

    public long memReadLong(long address) {
        ensureOpen();
        readInto(address, scratch, 8);
        return scratch.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }

    public int memReadInt(long address) {
        ensureOpen();
        readInto(address, scratch, 4);
        return scratch.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
    }

    public void memWriteLong(long address, long value) {
        ensureOpen();
        scratch.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, value);
        writeFrom(address, scratch, 8);
    }

    public void memWriteInt(long address, int value) {
        ensureOpen();
        scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 0, value);
        writeFrom(address, scratch, 4);
    }

    private void readInto(long address, MemorySegment seg, long n) {
        int err;
        try {
            err = (int) UC_MEM_READ.invokeExact(uc, address, seg, n);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        if (err != 0) throw new UnicornException(err, "uc_mem_read(0x" + Long.toHexString(address) + ", " + n + "): " + strerror(err));
    }

    private void writeFrom(long address, MemorySegment seg, long n) {
        int err;
        try {
            err = (int) UC_MEM_WRITE.invokeExact(uc, address, seg, n);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        if (err != 0) throw new UnicornException(err, "uc_mem_write(0x" + Long.toHexString(address) + ", " + n + "): " + strerror(err));
    }

    // ------------------------------------------------------------------ registers

    /**
     * Reads a register of up to 64 bits (ids from {@link X86Reg} / {@link Arm64Reg}). Narrow
     * registers come back zero-extended (Unicorn writes only their size, e.g. 2 bytes for an x86
     * segment selector, so the buffer is cleared first).
     */
    public long regRead(int reg) {
        int err;
        scratch.set(JAVA_LONG, 0, 0);
        try {
            err = (int) UC_REG_READ.invokeExact(uc, reg, scratchAddress);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        if (err != 0) throw new UnicornException(err, "uc_reg_read(" + reg + "): " + strerror(err));
        return scratch.get(JAVA_LONG, 0);
    }

    /**
     * A fixed list of registers read in one engine call ({@code uc_reg_read_batch}): a probe
     * hit's handler reads several, and each {@link #regRead} is a call of its own. The native
     * arrays live as long as the engine.
     */
    public RegisterBatch registerBatch(int... regs) {
        ensureOpen();
        return new RegisterBatch(new int[0][], regs.clone());
    }

    /**
     * arm64: a batch that also reads system registers by encoding ({@code {op0, op1, CRn, CRm,
     * op2}} each, as {@link #sysRegRead}); their values come first in {@link RegisterBatch#read}.
     */
    public RegisterBatch registerBatch(int[][] systemRegs, int... regs) {
        ensureOpen();
        return new RegisterBatch(systemRegs.clone(), regs.clone());
    }

    /** See {@link #registerBatch}. */
    public final class RegisterBatch {
        private static final long SLOT = 32;    // a uc_arm64_cp_reg; a plain register uses its first 8 bytes
        private final int count;
        /** Where each register's value is in {@link #copy}, in longs. */
        private final int[] valueIndex;
        private final MemorySegment ids, pointers, values;
        /**
         * The value area copied to the heap in one bulk copy after the call, then read as an
         * array: under the client compiler a {@code MemorySegment} access per register cost more
         * than the engine's batch read itself.
         */
        private final long[] copy;
        private final MemorySegment copySegment;

        private RegisterBatch(int[][] systemRegs, int[] regs) {
            count = systemRegs.length + regs.length;
            ids = arena.allocate(JAVA_INT, Math.max(1, count));
            pointers = arena.allocate(ADDRESS, Math.max(1, count));
            values = arena.allocate(SLOT * Math.max(1, count), 8);
            valueIndex = new int[count];
            copy = new long[(int) (SLOT / 8) * Math.max(1, count)];
            copySegment = MemorySegment.ofArray(copy);
            for (int i = 0; i < count; i++) {
                long slot = SLOT * i;
                if (i < systemRegs.length) {
                    int[] e = systemRegs[i];   // op0, op1, CRn, CRm, op2 -> the struct's crn, crm, op0, op1, op2
                    ids.setAtIndex(JAVA_INT, i, Arm64Reg.CP_REG);
                    values.set(JAVA_INT, slot, e[2]);
                    values.set(JAVA_INT, slot + 4, e[3]);
                    values.set(JAVA_INT, slot + 8, e[0]);
                    values.set(JAVA_INT, slot + 12, e[1]);
                    values.set(JAVA_INT, slot + 16, e[4]);
                    valueIndex[i] = (int) ((slot + 24) / 8);
                } else {
                    ids.setAtIndex(JAVA_INT, i, regs[i - systemRegs.length]);
                    valueIndex[i] = (int) (slot / 8);
                }
                pointers.setAtIndex(ADDRESS, i, values.asSlice(slot, SLOT));
            }
            MemorySegment.copy(values, 0, copySegment, 0, values.byteSize());   // the system registers' encodings
        }

        public int size() { return count; }

        /** Reads the registers into {@code out[0 .. size()-1]}, zero-extended as {@link #regRead} gives them. */
        public void read(long[] out) {
            ensureOpen();
            for (int i = 0; i < count; i++) copy[valueIndex[i]] = 0;
            MemorySegment.copy(copySegment, 0, values, 0, values.byteSize());   // a value narrower than 8 bytes is zero-extended
            int err;
            try {
                err = (int) UC_REG_READ_BATCH.invokeExact(uc, ids.address(), pointers.address(), count);
            } catch (Throwable t) {
                throw new UnicornException(-1, t.toString());
            }
            if (err != 0) throw new UnicornException(err, "uc_reg_read_batch: " + strerror(err));
            MemorySegment.copy(values, 0, copySegment, 0, values.byteSize());
            for (int i = 0; i < count; i++) out[i] = copy[valueIndex[i]];
        }
    }

    /**
     * How many times the CPU state may have changed under a caller: counts register writes,
     * context restores and runs of the engine. A caller that keeps register values read in a
     * batch (a probe hit's) keeps them only while this stays the same.
     */
    public long stateChanges() { return stateChanges; }

    private long stateChanges;

    public void regWrite(int reg, long value) {
        stateChanges++;
        scratch.set(JAVA_LONG, 0, value);
        int err;
        try {
            err = (int) UC_REG_WRITE.invokeExact(uc, reg, scratchAddress);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        if (err != 0) throw new UnicornException(err, "uc_reg_write(" + reg + "): " + strerror(err));
    }

    /** Reads an arm64 system register by its encoding (op0, op1, CRn, CRm, op2). */
    public long sysRegRead(int op0, int op1, int crn, int crm, int op2) {
        fillCpReg(op0, op1, crn, crm, op2, 0);
        rawReg(UC_REG_READ, Arm64Reg.CP_REG, "uc_reg_read(CP_REG)");
        return scratch.get(JAVA_LONG, 24);
    }

    public void sysRegWrite(int op0, int op1, int crn, int crm, int op2, long value) {
        fillCpReg(op0, op1, crn, crm, op2, value);
        rawReg(UC_REG_WRITE, Arm64Reg.CP_REG, "uc_reg_write(CP_REG)");
    }

    private void fillCpReg(int op0, int op1, int crn, int crm, int op2, long value) {
        scratch.set(JAVA_INT, 0, crn);
        scratch.set(JAVA_INT, 4, crm);
        scratch.set(JAVA_INT, 8, op0);
        scratch.set(JAVA_INT, 12, op1);
        scratch.set(JAVA_INT, 16, op2);
        scratch.set(JAVA_INT, 20, 0);
        scratch.set(JAVA_LONG, 24, value);
    }

    /** Reads an x86 MSR. */
    public long msrRead(int msr) {
        scratch.set(JAVA_INT, 0, msr);
        scratch.set(JAVA_INT, 4, 0);
        scratch.set(JAVA_LONG, 8, 0);
        rawReg(UC_REG_READ, X86Reg.MSR, "uc_reg_read(MSR 0x" + Integer.toHexString(msr) + ")");
        return scratch.get(JAVA_LONG, 8);
    }

    public void msrWrite(int msr, long value) {
        scratch.set(JAVA_INT, 0, msr);
        scratch.set(JAVA_INT, 4, 0);
        scratch.set(JAVA_LONG, 8, value);
        rawReg(UC_REG_WRITE, X86Reg.MSR, "uc_reg_write(MSR 0x" + Integer.toHexString(msr) + ")");
    }

    /** x86 descriptor-table or segment register (GDTR, IDTR, LDTR, TR). */
    public record X86Mmr(int selector, long base, int limit, int flags) {}

    public X86Mmr mmrRead(int reg) {
        scratch.fill((byte) 0);
        rawReg(UC_REG_READ, reg, "uc_reg_read(" + reg + ")");
        return new X86Mmr(Short.toUnsignedInt(scratch.get(JAVA_SHORT, 0)), scratch.get(JAVA_LONG, 8),
                scratch.get(JAVA_INT, 16), scratch.get(JAVA_INT, 20));
    }

    public void mmrWrite(int reg, X86Mmr v) {
        scratch.fill((byte) 0);
        scratch.set(JAVA_SHORT, 0, (short) v.selector());
        scratch.set(JAVA_LONG, 8, v.base());
        scratch.set(JAVA_INT, 16, v.limit());
        scratch.set(JAVA_INT, 20, v.flags());
        rawReg(UC_REG_WRITE, reg, "uc_reg_write(" + reg + ")");
    }

    private void rawReg(MethodHandle h, int reg, String what) {
        if (h == UC_REG_WRITE) stateChanges++;
        int err;
        try {
            err = (int) h.invokeExact(uc, reg, scratchAddress);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
        if (err != 0) throw new UnicornException(err, what + ": " + strerror(err));
    }

    // ------------------------------------------------------------------ run

    /**
     * Runs from {@code begin} until {@code until} is reached, {@code count} instructions ran (0 = no
     * limit), or a hook stopped the engine. Unicorn errors become {@link UnicornException}; a
     * throwable recorded by a hook becomes {@link HookFailedException}.
     */
    public void start(long begin, long until, long timeoutMicros, long count) {
        ensureOpen();
        if (exitsMode) setExitFor(until);
        hookFailure = null;
        int err;
        stateChanges++;
        running = true;
        try {
            err = (int) UC_EMU_START.invokeExact(uc, begin, until, timeoutMicros, count);
        } catch (Throwable t) {
            throw new UnicornException(-1, "uc_emu_start: " + t);
        } finally {
            running = false;
            stateChanges++;
            if (flushAfterRun) {
                flushAfterRun = false;
                flushTranslationCache();
            }
        }
        Throwable failure = hookFailure;
        if (failure != null) {
            hookFailure = null;
            throw new HookFailedException(failure);
        }
        if (err != 0) throw new UnicornException(err, "uc_emu_start: " + strerror(err));
    }

    /** Asks the engine to stop; only safe from a hook running on the emulating thread. */
    public void stop() {
        if (closed) return;
        try {
            int rc = (int) UC_EMU_STOP.invokeExact(uc);
            if (rc != 0) throw new UnicornException(rc, "uc_emu_stop: " + strerror(rc));
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** Records a failure from a hook and stops; {@link #start} rethrows it. */
    void fail(Throwable t) {
        if (hookFailure == null) hookFailure = t;
        try {
            int ignored = (int) UC_EMU_STOP.invokeExact(uc);
        } catch (Throwable ignoredToo) {
            // nothing more can be done inside an upcall
        }
    }

    // ------------------------------------------------------------------ contexts

    /** A saved CPU context (registers only), usable for save/restore cycles. */
    public final class Context implements AutoCloseable {
        final MemorySegment ptr;
        private boolean freed;
        /**
         * {@link #blob()}, made once: {@code reinterpret} is caller-sensitive (under the client
         * compiler a stack walk, {@code JVM_GetCallerClass}, on every call) and the size is an
         * engine call; arm64's {@code setPc} asked for it at every probe hit (8 % of the hit's samples).
         */
        private MemorySegment blob;

        private Context(MemorySegment ptr) { this.ptr = ptr; }

        /** The raw context blob (Unicorn's internal layout; used by the x86 nested-exception fix). */
        public MemorySegment blob() {
            MemorySegment b = blob;
            if (b == null) blob = b = ptr.reinterpret(contextSize());
            return b;
        }

        @Override public void close() {
            if (freed || closed) return;
            freed = true;
            try {
                int ignored = (int) UC_CONTEXT_FREE.invokeExact(ptr);
            } catch (Throwable t) {
                throw new UnicornException(-1, t.toString());
            }
        }
    }

    public Context contextAlloc() {
        ensureOpen();
        try {
            MemorySegment out = scratch;
            check((int) UC_CONTEXT_ALLOC.invokeExact(uc, out), "uc_context_alloc");
            return new Context(out.get(ADDRESS, 0));
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    /** {@code sizeof(struct uc_context)}, the header before the saved CPU state, on LP64 hosts. */
    private static final long CONTEXT_HEADER = 40;

    /**
     * A context whose save and restore copy only the first {@code end} bytes of the blob (header
     * included) instead of the whole CPU state: for hot paths that edit a few fields near the start
     * of the CPU state (x86's hflags and segment caches, either arch's PC) between a save and a
     * restore. Unicorn 2.1.4's x86 and arm64 save and restore are one {@code memcpy} of the
     * context's own {@code context_size} (its header's first field, set by {@code uc_context_alloc}
     * to the whole state: 5,568 bytes on x86), so a smaller size copies a prefix; a restore then
     * writes back exactly the prefix the save read, the rest of the CPU state untouched
     * ({@code UnicornBindingTest}). Only where that layout is found (the first field equal to the
     * state's size, the header's arch and mode this engine's) is the size lowered; otherwise the
     * context is a whole one, which is correct, only slower.
     */
    public Context contextAllocPrefix(long end) {
        Context c = contextAlloc();
        MemorySegment header = c.ptr.reinterpret(CONTEXT_HEADER);
        long state = contextSize() - CONTEXT_HEADER;
        int mode = arch == ARCH_X86 ? MODE_64 : MODE_ARM;
        if ((arch == ARCH_X86 || arch == ARCH_ARM64) && end > CONTEXT_HEADER && end - CONTEXT_HEADER < state
                && header.get(JAVA_LONG, 0) == state && header.get(JAVA_INT, 8) == mode && header.get(JAVA_INT, 12) == arch) {
            header.set(JAVA_LONG, 0, end - CONTEXT_HEADER);
        }
        return c;
    }

    /** How many bytes of CPU state {@code c}'s save and restore copy. */
    public long contextCopied(Context c) {
        return c.ptr.reinterpret(CONTEXT_HEADER).get(JAVA_LONG, 0);
    }

    public long contextSize() {
        try {
            return (long) UC_CONTEXT_SIZE.invokeExact(uc);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    public void contextSave(Context c) {
        try {
            check((int) UC_CONTEXT_SAVE.invokeExact(uc, c.ptr), "uc_context_save");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    public void contextRestore(Context c) {
        stateChanges++;
        try {
            check((int) UC_CONTEXT_RESTORE.invokeExact(uc, c.ptr), "uc_context_restore");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        }
    }

    // ------------------------------------------------------------------ hooks

    /** A registered hook: its upcall stub lives (in its own arena) until {@link #delete}. */
    public static final class Hook {
        private final long handle;
        private final Arena arena;
        private final Object callback; // strongly referenced for the hook's lifetime
        private final boolean stopsInside;

        private Hook(long handle, Arena arena, Object callback, boolean stopsInside) {
            this.handle = handle;
            this.arena = arena;
            this.callback = callback;
            this.stopsInside = stopsInside;
        }

        public Object callback() { return callback; }
    }

    @FunctionalInterface public interface IntrHook { void onInterrupt(Unicorn uc, int intno); }
    @FunctionalInterface public interface CodeHook { void onCode(Unicorn uc, long address, int size); }
    @FunctionalInterface public interface MemHook { void onMemory(Unicorn uc, int type, long address, int size, long value); }
    /** Returns true to continue (after fixing the access), false to stop with an error. */
    @FunctionalInterface public interface MemEventHook { boolean onMemoryEvent(Unicorn uc, int type, long address, int size, long value); }
    /** Returns true to continue, false to stop with UC_ERR_INSN_INVALID. */
    @FunctionalInterface public interface InvalidInsnHook { boolean onInvalidInstruction(Unicorn uc); }
    @FunctionalInterface public interface PortInHook { int onIn(Unicorn uc, int port, int size); }
    @FunctionalInterface public interface PortOutHook { void onOut(Unicorn uc, int port, int size, int value); }
    @FunctionalInterface public interface SyscallHook { void onSyscall(Unicorn uc); }
    /** Returns true when the hook produced the result itself (the engine's instruction is skipped). */
    @FunctionalInterface public interface CpuidHook { boolean onCpuid(Unicorn uc); }
    /**
     * arm64 MRS/MSR/SYS hook: {@code reg} is the general register involved, {@code sysReg} the
     * encoded system register. Return true when the host handled the access (Unicorn skips it).
     */
    @FunctionalInterface public interface SysRegHook { boolean onSysReg(Unicorn uc, int reg, SysRegAccess sysReg); }
    @FunctionalInterface public interface MmioReadHandler { long read(long offset, int size); }
    @FunctionalInterface public interface MmioWriteHandler { void write(long offset, int size, long value); }

    /** The system register named by an intercepted MRS/MSR (and, for MSR, the value written). */
    public record SysRegAccess(int op0, int op1, int crn, int crm, int op2, long value) {
        /** The encoding as one comparable key: op0:op1:CRn:CRm:op2. */
        public int key() { return SysRegs.key(op0, op1, crn, crm, op2); }
    }

    public Hook hookInterrupt(IntrHook h) {
        return add(HOOK_INTR, ON_INTR.bindTo(this).bindTo(h), CB_INTR, h, 1, 0, -1);
    }

    /**
     * Code hook on [begin, end] (inclusive; begin > end means everywhere — avoid, it is slow).
     * <p><b>Never together with {@code Machine}'s run loop:</b> on Unicorn 2.1.1 the mere presence
     * of a code hook (even on an address never executed) makes a run stopped from a block hook
     * resume at the previous block's start with that block's effects kept, so it runs twice
     * (Linux breaks on both arches; {@code CodeHookRewindTest}). Use block hooks or
     * {@code Machine.addBreakpoint}.
     */
    public Hook hookCode(long begin, long end, CodeHook h) {
        return add(HOOK_CODE, ON_CODE.bindTo(this).bindTo(h), CB_CODE, h, begin, end, -1);
    }

    public Hook hookBlock(long begin, long end, CodeHook h) {
        return add(HOOK_BLOCK, ON_CODE.bindTo(this).bindTo(h), CB_CODE, h, begin, end, -1);
    }

    /**
     * A block hook whose callback is native code (a {@code uc_cb_hookcode_t} function pointer)
     * with its own {@code userData}: no Java upcall per block. The caller keeps both alive.
     */
    public Hook hookBlockNative(MemorySegment callback, MemorySegment userData, long begin, long end) {
        // Unicorn calls the only block hook straight from translated code: through an entry within a direct call of it.
        return addNative(HOOK_BLOCK, CodePlacement.entry(codeRange, callback), userData, begin, end, -1, Arena.ofShared(), callback);
    }

    /**
     * A hook on every newly translated block ({@code UC_HOOK_EDGE_GENERATED},
     * {@code uc_hook_edge_gen_t}: called after the translation, before the block first runs)
     * whose callback is native code with its own {@code userData}. The caller keeps both alive.
     */
    public Hook hookBlockGeneratedNative(MemorySegment callback, MemorySegment userData) {
        return addNative(HOOK_EDGE_GENERATED, callback, userData, 1, 0, -1, Arena.ofShared(), callback);
    }

    /**
     * An interrupt hook ({@code uc_cb_hookintr_t}) whose callback is native code with its own
     * {@code userData}; {@code keepAlive} is referenced for the hook's lifetime.
     */
    public Hook hookInterruptNative(MemorySegment callback, MemorySegment userData, Object keepAlive) {
        return addNative(HOOK_INTR, callback, userData, 1, 0, -1, Arena.ofShared(), keepAlive);
    }

    /**
     * The native function pointer of an upcall to {@code h} with Unicorn's interrupt hook
     * signature ({@code uc_cb_hookintr_t}), for a native hook that forwards to Java. The stub
     * lives as long as {@code arena}.
     */
    public MemorySegment interruptUpcallStub(IntrHook h, Arena arena) {
        return LINKER.upcallStub(ON_INTR.bindTo(this).bindTo(h), CB_INTR, arena);
    }

    /** Memory access hook ({@code types}: HOOK_MEM_READ / WRITE / FETCH / READ_AFTER, or-ed). */
    public Hook hookMemory(int types, long begin, long end, MemHook h) {
        return add(types, ON_MEM.bindTo(this).bindTo(h), CB_MEM, h, begin, end, -1);
    }

    /** Invalid-access hook ({@code types}: HOOK_MEM_*_UNMAPPED / *_PROT). */
    public Hook hookMemoryEvent(int types, long begin, long end, MemEventHook h) {
        return add(types, ON_MEM_EVENT.bindTo(this).bindTo(h), CB_MEM_EVENT, h, begin, end, -1);
    }

    /**
     * An invalid-instruction hook ({@code uc_cb_hookinsn_invalid_t}) whose callback is native code
     * with its own {@code userData}; hooks run in the order added until one returns true.
     */
    public Hook hookInvalidInstructionNative(MemorySegment callback, MemorySegment userData, Object keepAlive) {
        return addNative(HOOK_INSN_INVALID, callback, userData, 1, 0, -1, Arena.ofShared(), keepAlive);
    }

    public Hook hookInvalidInstruction(InvalidInsnHook h) {
        return add(HOOK_INSN_INVALID, ON_INSN_INVALID.bindTo(this).bindTo(h), CB_INSN_INVALID, h, 1, 0, -1);
    }

    public Hook hookPortIn(PortInHook h) {
        return add(HOOK_INSN, ON_IN.bindTo(this).bindTo(h), CB_IN, h, 1, 0, X86_INS_IN);
    }

    public Hook hookPortOut(PortOutHook h) {
        return add(HOOK_INSN, ON_OUT.bindTo(this).bindTo(h), CB_OUT, h, 1, 0, X86_INS_OUT);
    }

    /** x86 {@code syscall}: the hook runs with RIP at the instruction; Unicorn adds 2 afterwards. */
    public Hook hookSyscall(SyscallHook h) {
        return add(HOOK_INSN, ON_SYSCALL.bindTo(this).bindTo(h), CB_SYSCALL, h, 1, 0, X86_INS_SYSCALL);
    }

    /**
     * x86 {@code cpuid}: the hook reads EAX/ECX and may write EAX..EDX itself; returning true skips
     * the engine's own CPUID (2.1.1 calls the callback as {@code int (*)(uc_engine*, void*)}).
     * Unicorn 2.1.4 also accepts UC_HOOK_INSN for RDTSC and RDTSCP (2.1.1 refused them); RDMSR
     * and WRMSR are still refused with UC_ERR_HOOK (measured).
     */
    public Hook hookCpuid(CpuidHook h) {
        return add(HOOK_INSN, ON_CPUID.bindTo(this).bindTo(h), CB_CPUID, h, 1, 0, X86_INS_CPUID);
    }

    /** arm64 MRS / MSR / SYS / SYSL ({@code insn}: ARM64_INS_*). */
    public Hook hookSysReg(int insn, SysRegHook h) {
        return add(HOOK_INSN, ON_ARM64_SYS.bindTo(this).bindTo(h), CB_ARM64_SYS, h, 1, 0, insn);
    }

    /**
     * The native function pointer of an upcall to {@code h} with Unicorn's arm64 MRS/MSR hook
     * signature ({@code uc_cb_insn_sys_t}), for a native hook that forwards to Java. The stub
     * lives as long as {@code arena}; failures inside {@code h} are handled as for any hook.
     */
    public MemorySegment sysRegUpcallStub(SysRegHook h, Arena arena) {
        return LINKER.upcallStub(ON_ARM64_SYS.bindTo(this).bindTo(h), CB_ARM64_SYS, arena);
    }

    /**
     * The native function pointer of an upcall to {@code h} with Unicorn's x86 {@code syscall}
     * hook signature ({@code uc_cb_insn_syscall_t}), for a native hook that forwards to Java.
     * The stub lives as long as {@code arena}.
     */
    public MemorySegment syscallUpcallStub(SyscallHook h, Arena arena) {
        return LINKER.upcallStub(ON_SYSCALL.bindTo(this).bindTo(h), CB_SYSCALL, arena);
    }

    /**
     * An instruction hook ({@code insn}: e.g. {@link #ARM64_INS_MRS}) whose callback is native
     * code with its own {@code userData}; {@code keepAlive} is referenced for the hook's lifetime.
     */
    public Hook hookInsnNative(int insn, MemorySegment callback, MemorySegment userData, Object keepAlive) {
        return addNative(HOOK_INSN, callback, userData, 1, 0, insn, Arena.ofShared(), keepAlive);
    }

    /**
     * As {@link #hookInsnNative(int, MemorySegment, MemorySegment, Object)}, the hook owning
     * {@code owned} (its state and the upcall stubs its native code forwards to): closed when the
     * hook is deleted or the engine closed. A stub bound to this engine keeps the engine, and the
     * machine around it, reachable until its arena is closed.
     */
    public Hook hookInsnNative(int insn, MemorySegment callback, MemorySegment userData, Arena owned, Object keepAlive) {
        return addNative(HOOK_INSN, callback, userData, 1, 0, insn, owned, keepAlive);
    }

    /** Adds a hook whose callback is native code ({@code insn} -1: not an instruction hook). */
    private Hook addNative(int type, MemorySegment callback, MemorySegment userData, long begin, long end, int insn, Arena owned,
                           Object keepAlive) {
        ensureOpen();
        try {
            MemorySegment hh = scratch;
            check(insn < 0 ? (int) UC_HOOK_ADD.invokeExact(uc, hh, type, callback, userData, begin, end)
                    : (int) UC_HOOK_ADD_INSN.invokeExact(uc, hh, type, callback, userData, begin, end, insn), "uc_hook_add(native, type " + type + ")");
            return registered(new Hook(hh.get(JAVA_LONG, 0), owned, keepAlive, (type & HOOKS_STOPPING_INSIDE) != 0));
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, "uc_hook_add: " + t);
        }
    }

    private Hook add(int type, MethodHandle target, FunctionDescriptor fd, Object cb, long begin, long end, int insn) {
        ensureOpen();
        Arena a = Arena.ofShared();
        try {
            MemorySegment stub = LINKER.upcallStub(target, fd, a);
            MemorySegment hh = scratch;
            int err = insn < 0
                    ? (int) UC_HOOK_ADD.invokeExact(uc, hh, type, stub, MemorySegment.NULL, begin, end)
                    : (int) UC_HOOK_ADD_INSN.invokeExact(uc, hh, type, stub, MemorySegment.NULL, begin, end, insn);
            check(err, "uc_hook_add(type " + type + ")");
            return registered(new Hook(hh.get(JAVA_LONG, 0), a, cb, (type & HOOKS_STOPPING_INSIDE) != 0));
        } catch (UnicornException e) {
            a.close();
            throw e;
        } catch (Throwable t) {
            a.close();
            throw new UnicornException(-1, "uc_hook_add: " + t);
        }
    }

    /** Keeps {@code h} among the engine's hooks; one that may stop the engine inside a block brings back the exit check after accesses. */
    private Hook registered(Hook h) {
        hooks.put(h.handle, h);
        if (h.stopsInside) {
            hooksStoppingInside++;
            applyExitAfterAccess();
        }
        return h;
    }

    /** Removes a hook and frees its upcall stub. */
    public void delete(Hook h) {
        ensureOpen();
        if (hooks.remove(h.handle) == null) return;
        try {
            check((int) UC_HOOK_DEL.invokeExact(uc, h.handle), "uc_hook_del");
        } catch (UnicornException e) {
            throw e;
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        } finally {
            h.arena.close();
            if (h.stopsInside) {
                hooksStoppingInside--;
                applyExitAfterAccess();
            }
        }
    }

    // --- upcall targets: every one catches everything ---

    /** Run at the start of every upcall of this engine's hooks (null: nothing). */
    private Runnable beforeUpcall;

    /**
     * Sets what runs at the start of every Java upcall of this engine's hooks, before the hook
     * (the machine hands natively recorded probe hits to their consumer there, so no hook sees the
     * guest before the hits that came first); null: nothing.
     */
    public void beforeUpcalls(Runnable r) { beforeUpcall = r; }

    private void beforeUpcall() {
        Runnable r = beforeUpcall;
        if (r != null) r.run();
    }

    private void onIntr(IntrHook h, long ucp, int intno, long user) {
        try { beforeUpcall(); h.onInterrupt(this, intno); } catch (Throwable t) { fail(t); }
    }

    private void onCode(CodeHook h, MemorySegment ucp, long address, int size, MemorySegment user) {
        try { beforeUpcall(); h.onCode(this, address, size); } catch (Throwable t) { fail(t); }
    }

    private void onMem(MemHook h, MemorySegment ucp, int type, long address, int size, long value, MemorySegment user) {
        try { beforeUpcall(); h.onMemory(this, type, address, size, value); } catch (Throwable t) { fail(t); }
    }

    private boolean onMemEvent(MemEventHook h, MemorySegment ucp, int type, long address, int size, long value, MemorySegment user) {
        try { beforeUpcall(); return h.onMemoryEvent(this, type, address, size, value); } catch (Throwable t) { fail(t); return false; }
    }

    private boolean onInsnInvalid(InvalidInsnHook h, MemorySegment ucp, MemorySegment user) {
        try { beforeUpcall(); return h.onInvalidInstruction(this); } catch (Throwable t) { fail(t); return false; }
    }

    private int onIn(PortInHook h, MemorySegment ucp, int port, int size, MemorySegment user) {
        try { beforeUpcall(); return h.onIn(this, port & 0xffff, size); } catch (Throwable t) { fail(t); return -1; }
    }

    private void onOut(PortOutHook h, MemorySegment ucp, int port, int size, int value, MemorySegment user) {
        try { beforeUpcall(); h.onOut(this, port & 0xffff, size, value); } catch (Throwable t) { fail(t); }
    }

    private void onSyscall(SyscallHook h, MemorySegment ucp, MemorySegment user) {
        try { beforeUpcall(); h.onSyscall(this); } catch (Throwable t) { fail(t); }
    }

    private int onCpuid(CpuidHook h, MemorySegment ucp, MemorySegment user) {
        try { beforeUpcall(); return h.onCpuid(this) ? 1 : 0; } catch (Throwable t) { fail(t); return 1; }
    }

    private int onArm64Sys(SysRegHook h, MemorySegment ucp, int reg, MemorySegment cp, MemorySegment user) {
        try {
            beforeUpcall();
            SysRegAccess acc = new SysRegAccess(cp.get(JAVA_INT, 8), cp.get(JAVA_INT, 12), cp.get(JAVA_INT, 0),
                    cp.get(JAVA_INT, 4), cp.get(JAVA_INT, 16), cp.get(JAVA_LONG, 24));
            return h.onSysReg(this, reg, acc) ? 1 : 0;
        } catch (Throwable t) {
            fail(t);
            return 1;
        }
    }

    private long onMmioRead(MmioReadHandler h, MemorySegment ucp, long offset, int size, MemorySegment user) {
        try { beforeUpcall(); return h.read(offset, size); } catch (Throwable t) { fail(t); return 0; }
    }

    private void onMmioWrite(MmioWriteHandler h, MemorySegment ucp, long offset, int size, long value, MemorySegment user) {
        try { beforeUpcall(); h.write(offset, size, value); } catch (Throwable t) { fail(t); }
    }

    // ------------------------------------------------------------------ close

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        try {
            int ignored = (int) UC_CLOSE.invokeExact(uc);
            CodePlacement.giveBack(codeRange);
        } catch (Throwable t) {
            throw new UnicornException(-1, t.toString());
        } finally {
            for (Hook h : hooks.values()) h.arena.close();
            hooks.clear();
            for (Arena a : mmioArenas) a.close();
            mmioArenas.clear();
            arena.close();
        }
    }
}
