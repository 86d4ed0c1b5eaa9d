package dev.kpemu.decoder;

/** A Capstone call failed; the message is Capstone's own ({@code cs_strerror}). */
public final class CapstoneException extends RuntimeException {
    private final int code;

    CapstoneException(String operation, int code, String capstoneMessage) {
        super(operation + " failed: " + capstoneMessage + " (cs_err " + code + ")");
        this.code = code;
    }

    /** The {@code cs_err} value Capstone returned. */
    public int code() {
        return code;
    }
}
