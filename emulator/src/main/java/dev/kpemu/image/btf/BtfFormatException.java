package dev.kpemu.image.btf;

import dev.kpemu.image.KernelImageException;

/**
 * BTF data is missing, truncated or malformed (bad magic, unsupported version, offsets outside the
 * blob, an unknown kind, a record running past the type section, a dangling type id or string
 * offset). The message is one line and says where.
 */
public class BtfFormatException extends KernelImageException {
    public BtfFormatException(String message) { super(message); }
}
