package dev.kpemu.decoder;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.kpemu.decoder.CsInstruction.Arm64Detail;
import dev.kpemu.decoder.CsInstruction.Arm64Operand;
import dev.kpemu.decoder.CsInstruction.Detail;
import dev.kpemu.decoder.CsInstruction.X86Detail;
import dev.kpemu.decoder.CsInstruction.X86Operand;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * FFM binding to Capstone 5 ({@code libcapstone.so}), with instruction detail switched on.
 *
 * <p>A {@code Capstone} object owns one native handle ({@code csh}). It is confined to the thread
 * that opened it: calls from any other thread throw {@link WrongThreadException}. Close it when done.
 * Failed native calls throw {@link CapstoneException} carrying Capstone's message.
 */
@SuppressWarnings("restricted") // FFM downcalls and reinterpret are this class's purpose
public final class Capstone implements AutoCloseable {
    /** The Capstone major version whose struct layouts {@link CapstoneLayout} describes. */
    public static final int SUPPORTED_MAJOR_VERSION = 5;

    private static final int CS_ARCH_ARM64 = 1, CS_ARCH_X86 = 3;
    private static final int CS_MODE_LITTLE_ENDIAN = 0, CS_MODE_64 = 8;
    private static final int CS_OPT_DETAIL = 2;
    private static final long CS_OPT_ON = 3;
    private static final int CS_ERR_OK = 0, CS_ERR_VERSION = 9;

    private static final MethodHandle CS_VERSION, CS_OPEN, CS_OPTION, CS_DISASM, CS_FREE, CS_CLOSE, CS_ERRNO,
            CS_STRERROR;

    static {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CAPSTONE);
        Linker linker = Linker.nativeLinker();
        CS_VERSION = bind(linker, lib, "cs_version", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        CS_OPEN = bind(linker, lib, "cs_open", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
        CS_OPTION = bind(linker, lib, "cs_option", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
        CS_DISASM = bind(linker, lib, "cs_disasm",
                FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS));
        CS_FREE = bind(linker, lib, "cs_free", FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG));
        CS_CLOSE = bind(linker, lib, "cs_close", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        CS_ERRNO = bind(linker, lib, "cs_errno", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        CS_STRERROR = bind(linker, lib, "cs_strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    }

    private final Arch arch;
    private final Thread owner;
    private final Arena arena;
    private final MemorySegment handleCell;
    private final long handle;
    private boolean closed;

    private Capstone(Arch arch, Arena arena, MemorySegment handleCell) {
        this.arch = arch;
        this.owner = Thread.currentThread();
        this.arena = arena;
        this.handleCell = handleCell;
        this.handle = handleCell.get(JAVA_LONG, 0);
    }

    /**
     * Opens a Capstone handle for {@code arch} (x86: 64-bit mode; arm64: little-endian) with
     * {@code CS_OPT_DETAIL} on.
     *
     * @throws CapstoneException if the library is not Capstone 5 or a native call fails
     */
    public static Capstone open(Arch arch) {
        checkVersion();
        Arena arena = Arena.ofConfined();
        try {
            MemorySegment cell = arena.allocate(JAVA_LONG);
            int csArch = arch == Arch.X86_64 ? CS_ARCH_X86 : CS_ARCH_ARM64;
            int csMode = arch == Arch.X86_64 ? CS_MODE_64 : CS_MODE_LITTLE_ENDIAN;
            check("cs_open", (int) CS_OPEN.invokeExact(csArch, csMode, cell));
            Capstone cs = new Capstone(arch, arena, cell);
            int rc = (int) CS_OPTION.invokeExact(cs.handle, CS_OPT_DETAIL, CS_OPT_ON);
            if (rc != CS_ERR_OK) {
                cs.close();
                throw error("cs_option(CS_OPT_DETAIL)", rc);
            }
            return cs;
        } catch (RuntimeException | Error e) {
            if (arena.scope().isAlive()) arena.close();
            throw e;
        } catch (Throwable t) {
            arena.close();
            throw new IllegalStateException(t);
        }
    }

    /** The arch this handle decodes. */
    public Arch arch() {
        return arch;
    }

    /**
     * Disassembles up to {@code maxCount} instructions ({@code 0}: as many as decode) from
     * {@code code}, the first at {@code address}. Decoding stops at the first undecodable bytes,
     * so the result may be shorter than the input (or empty).
     */
    public List<CsInstruction> disassemble(byte[] code, long address, int maxCount) {
        ensureUsable();
        if (maxCount < 0) throw new IllegalArgumentException("maxCount < 0: " + maxCount);
        if (code.length == 0) return List.of();
        try (Arena call = Arena.ofConfined()) {
            MemorySegment input = call.allocateFrom(JAVA_BYTE, code);
            MemorySegment out = call.allocate(ADDRESS);
            long count = (long) CS_DISASM.invokeExact(handle, input, (long) code.length, address, (long) maxCount, out);
            if (count == 0) {
                int err = (int) CS_ERRNO.invokeExact(handle);
                if (err != CS_ERR_OK) throw error("cs_disasm", err);
                return List.of();
            }
            MemorySegment insns = out.get(ADDRESS, 0).reinterpret(count * CapstoneLayout.INSN.byteSize());
            try {
                List<CsInstruction> result = new ArrayList<>((int) count);
                for (long i = 0; i < count; i++) {
                    result.add(read(insns.asSlice(i * CapstoneLayout.INSN.byteSize(), CapstoneLayout.INSN)));
                }
                return result;
            } finally {
                CS_FREE.invokeExact(insns, count);
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Closes the native handle; further use throws {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        checkThread();
        if (closed) return;
        closed = true;
        try {
            int rc = (int) CS_CLOSE.invokeExact(handleCell);
            if (rc != CS_ERR_OK) throw error("cs_close", rc);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            arena.close();
        }
    }

    /** Capstone's message for a {@code cs_err} value ({@code cs_strerror}). */
    public static String strerror(int code) {
        try {
            MemorySegment s = (MemorySegment) CS_STRERROR.invokeExact(code);
            return s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private CsInstruction read(MemorySegment insn) {
        int size = Short.toUnsignedInt(insn.get(JAVA_SHORT, CapstoneLayout.INSN_SIZE));
        byte[] bytes = insn.asSlice(CapstoneLayout.INSN_BYTES, size).toArray(JAVA_BYTE);
        MemorySegment detail = insn.get(ADDRESS, CapstoneLayout.INSN_DETAIL).reinterpret(CapstoneLayout.DETAIL_SIZE);
        int groupCount = Byte.toUnsignedInt(detail.get(JAVA_BYTE, CapstoneLayout.DETAIL_GROUPS_COUNT));
        List<Integer> groups = new ArrayList<>(groupCount);
        for (int g = 0; g < groupCount; g++) {
            groups.add(Byte.toUnsignedInt(detail.get(JAVA_BYTE, CapstoneLayout.DETAIL_GROUPS + g)));
        }
        MemorySegment archDetail = detail.asSlice(CapstoneLayout.DETAIL_ARCH);
        Detail d = arch == Arch.X86_64 ? readX86(archDetail) : readArm64(archDetail);
        return new CsInstruction(
                insn.get(JAVA_INT, CapstoneLayout.INSN_ID),
                insn.get(JAVA_LONG, CapstoneLayout.INSN_ADDRESS),
                bytes,
                insn.asSlice(CapstoneLayout.INSN_MNEMONIC, CapstoneLayout.MNEMONIC_SIZE).getString(0),
                insn.asSlice(CapstoneLayout.INSN_OP_STR, CapstoneLayout.OP_STR_SIZE).getString(0),
                groups, d);
    }

    private static X86Detail readX86(MemorySegment x86) {
        int count = Math.min(u8(x86, CapstoneLayout.X86_OP_COUNT), CapstoneLayout.MAX_OPERANDS);
        List<X86Operand> ops = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            MemorySegment op = x86.asSlice(CapstoneLayout.X86_OPERANDS + i * CapstoneLayout.X86_OP.byteSize(),
                    CapstoneLayout.X86_OP);
            ops.add(new X86Operand(
                    op.get(JAVA_INT, CapstoneLayout.X86_OP_TYPE),
                    op.get(JAVA_INT, CapstoneLayout.X86_OP_REG),
                    op.get(JAVA_LONG, CapstoneLayout.X86_OP_IMM),
                    op.get(JAVA_INT, CapstoneLayout.X86_OP_MEM_BASE),
                    op.get(JAVA_INT, CapstoneLayout.X86_OP_MEM_INDEX),
                    op.get(JAVA_LONG, CapstoneLayout.X86_OP_MEM_DISP),
                    u8(op, CapstoneLayout.X86_OP_SIZE)));
        }
        return new X86Detail(
                u8(x86, CapstoneLayout.X86_REX),
                u8(x86, CapstoneLayout.X86_ADDR_SIZE),
                u8(x86, CapstoneLayout.X86_MODRM),
                u8(x86, CapstoneLayout.X86_ENC_MODRM_OFFSET),
                u8(x86, CapstoneLayout.X86_ENC_DISP_OFFSET),
                u8(x86, CapstoneLayout.X86_ENC_DISP_SIZE),
                u8(x86, CapstoneLayout.X86_ENC_IMM_OFFSET),
                u8(x86, CapstoneLayout.X86_ENC_IMM_SIZE),
                ops);
    }

    private static Arm64Detail readArm64(MemorySegment arm64) {
        int count = Math.min(u8(arm64, CapstoneLayout.ARM64_OP_COUNT), CapstoneLayout.MAX_OPERANDS);
        List<Arm64Operand> ops = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            MemorySegment op = arm64.asSlice(CapstoneLayout.ARM64_OPERANDS + i * CapstoneLayout.ARM64_OP.byteSize(),
                    CapstoneLayout.ARM64_OP);
            ops.add(new Arm64Operand(
                    op.get(JAVA_INT, CapstoneLayout.ARM64_OP_TYPE),
                    op.get(JAVA_INT, CapstoneLayout.ARM64_OP_REG),
                    op.get(JAVA_LONG, CapstoneLayout.ARM64_OP_IMM),
                    op.get(JAVA_INT, CapstoneLayout.ARM64_OP_MEM_BASE),
                    op.get(JAVA_INT, CapstoneLayout.ARM64_OP_MEM_DISP)));
        }
        return new Arm64Detail(arm64.get(JAVA_INT, CapstoneLayout.ARM64_CC), ops);
    }

    private static int u8(MemorySegment s, long offset) {
        return Byte.toUnsignedInt(s.get(JAVA_BYTE, offset));
    }

    /** The loaded Capstone's version, {@code major.minor} as {@code cs_version} gives it. */
    public static String version() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment major = a.allocate(JAVA_INT), minor = a.allocate(JAVA_INT);
            int combined = (int) CS_VERSION.invokeExact(major, minor);
            return major.get(JAVA_INT, 0) + "." + minor.get(JAVA_INT, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void checkVersion() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment major = a.allocate(JAVA_INT), minor = a.allocate(JAVA_INT);
            int combined = (int) CS_VERSION.invokeExact(major, minor);
            int maj = major.get(JAVA_INT, 0);
            if (maj != SUPPORTED_MAJOR_VERSION) {
                throw new CapstoneException("cs_version", CS_ERR_VERSION, "Capstone " + maj + "."
                        + minor.get(JAVA_INT, 0) + " loaded, kpemu's struct layouts need " + SUPPORTED_MAJOR_VERSION
                        + ".x (" + strerror(CS_ERR_VERSION) + ", cs_version " + Integer.toHexString(combined) + ")");
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private void ensureUsable() {
        checkThread();
        if (closed) throw new IllegalStateException("Capstone handle is closed");
    }

    private void checkThread() {
        if (Thread.currentThread() != owner) {
            throw new WrongThreadException("Capstone handle is confined to " + owner);
        }
    }

    private static void check(String operation, int rc) {
        if (rc != CS_ERR_OK) throw error(operation, rc);
    }

    private static CapstoneException error(String operation, int rc) {
        return new CapstoneException(operation, rc, strerror(rc));
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lib.find(name)
                .orElseThrow(() -> new IllegalStateException("libcapstone has no symbol " + name));
        return linker.downcallHandle(symbol, fd);
    }
}
