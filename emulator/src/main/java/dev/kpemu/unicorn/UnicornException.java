package dev.kpemu.unicorn;

/** A Unicorn call failed; {@link #error()} is the {@code uc_err} code (-1 for binding failures). */
public class UnicornException extends RuntimeException {
    private final int error;

    public UnicornException(int error, String message) {
        super(message);
        this.error = error;
    }

    public int error() { return error; }

    public static final int ERR_READ_UNMAPPED = 6, ERR_WRITE_UNMAPPED = 7, ERR_FETCH_UNMAPPED = 8,
            ERR_INSN_INVALID = 10, ERR_MAP = 11, ERR_WRITE_PROT = 12, ERR_READ_PROT = 13, ERR_FETCH_PROT = 14,
            ERR_ARG = 15, ERR_EXCEPTION = 21;
}
