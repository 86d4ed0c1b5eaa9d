package dev.kpemu.decoder;

/** The bytes at {@link #address()} are not a valid (or complete) instruction. */
public final class UndecodableInstructionException extends RuntimeException {
    private final long address;

    UndecodableInstructionException(long address, String detail) {
        super(String.format("undecodable instruction at %#x: %s", address, detail));
        this.address = address;
    }

    /** Address of the undecodable bytes. */
    public long address() {
        return address;
    }
}
