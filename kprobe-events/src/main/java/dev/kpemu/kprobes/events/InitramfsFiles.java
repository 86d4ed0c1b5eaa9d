package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.image.Initramfs;
import dev.kpemu.kprobes.Errno;

/**
 * The guest's files as the initramfs kpemu builds gives them (the root file system of its
 * guests): path lookup as Linux's {@code kern_path} with {@code LOOKUP_FOLLOW} does it on that
 * tree — {@code .} and {@code ..} (the root's parent is the root), symlinks followed (relative
 * to their directory, at most 40), ENOENT for a missing component, ENOTDIR for a component that
 * is not a directory.
 */
public final class InitramfsFiles implements GuestFiles {
    /** {@code MAXSYMLINKS}. */
    private static final int MAX_SYMLINKS = 40;

    private final Map<String, Initramfs.Entry> byPath = new HashMap<>();

    public InitramfsFiles(Initramfs archive) {
        this(archive.entries());
    }

    public InitramfsFiles(List<Initramfs.Entry> entries) {
        for (Initramfs.Entry e : entries) byPath.put(e.path(), e);
    }

    @Override
    public Lookup lookup(String path) {
        List<String> todo = new ArrayList<>(List.of(path.split("/")));
        List<String> at = new ArrayList<>();     // resolved components of the current directory
        int links = 0;
        while (!todo.isEmpty()) {
            String c = todo.removeFirst();
            if (c.isEmpty() || c.equals(".")) continue;
            if (c.equals("..")) {
                if (!at.isEmpty()) at.removeLast();
                continue;
            }
            Initramfs.Entry parent = at.isEmpty() ? null : byPath.get(String.join("/", at));
            if (parent != null && !parent.isDirectory()) return new Lookup(Errno.ENOTDIR, false, null);
            at.add(c);
            Initramfs.Entry e = byPath.get(String.join("/", at));
            if (e == null) return new Lookup(Errno.ENOENT, false, null);
            if (e.isSymlink()) {
                if (++links > MAX_SYMLINKS) return new Lookup(Errno.ELOOP, false, null);
                at.removeLast();
                String target = e.symlinkTarget();
                if (target.startsWith("/")) at.clear();
                List<String> next = new ArrayList<>(List.of(target.split("/")));
                next.addAll(todo);
                todo = next;
            }
        }
        if (at.isEmpty()) return new Lookup(null, false, "/");
        Initramfs.Entry e = byPath.get(String.join("/", at));
        return new Lookup(null, e.isFile(), "/" + String.join("/", at));
    }
}
