package dev.kpemu.decoder;

import dev.kpemu.machine.Arch;

/**
 * Decodes machine code into {@link Instruction}s for one arch.
 *
 * <p>A decoder owns a native Capstone handle: it is confined to the thread that opened it and must
 * be closed.
 */
public interface Decoder extends AutoCloseable {

    /** Opens a decoder for {@code arch}. */
    static Decoder open(Arch arch) {
        return switch (arch) {
            case X86_64 -> new X86Decoder();
            case ARM64 -> new Arm64Decoder();
        };
    }

    /** The arch this decoder handles. */
    Arch arch();

    /**
     * Decodes the single instruction at the start of {@code code}, located at {@code address}.
     * Bytes after the instruction are ignored.
     *
     * @throws UndecodableInstructionException if the bytes are not a complete valid instruction
     */
    Instruction decodeOne(byte[] code, long address);

    /**
     * Decodes {@code code} linearly from {@code address} to its end, stopping at the first bytes
     * that do not decode (reported in {@link Disassembly#undecodableAt()}).
     */
    Disassembly decodeAll(byte[] code, long address);

    /** Releases the native handle. */
    @Override
    void close();
}
