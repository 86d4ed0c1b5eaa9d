package dev.kpemu.image;

import java.io.IOException;

/**
 * A guest kernel or guest image file is missing, is not a kernel, is a kernel of another
 * architecture or format, or is corrupt. The message is one line and names the file.
 */
public class KernelImageException extends IOException {
    public KernelImageException(String message) { super(message); }
    public KernelImageException(String message, Throwable cause) { super(message, cause); }
}
