package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;

/**
 * The guest's files as a uprobe definition sees them: what {@code kern_path(PATH, LOOKUP_FOLLOW)}
 * finds when the definition is written ({@code __trace_uprobe_create}).
 */
public interface GuestFiles {
    /**
     * A lookup's outcome: {@code errno} null when the path resolves, then whether it is a
     * regular file and its path with every symlink, {@code .} and {@code ..} resolved.
     */
    record Lookup(Errno errno, boolean regular, String canonicalPath) {
        public boolean found() { return errno == null; }
    }

    /** Resolves an absolute or root-relative path, following symlinks. */
    Lookup lookup(String path);
}
