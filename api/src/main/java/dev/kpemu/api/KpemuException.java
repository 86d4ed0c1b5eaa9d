package dev.kpemu.api;

/** The session could not boot: a kernel, initramfs or guest image that cannot be found, fetched or read. One-line message. */
public final class KpemuException extends RuntimeException {
    public KpemuException(String message, Throwable cause) { super(message, cause); }
}
