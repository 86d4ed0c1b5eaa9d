package dev.kpemu.image;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Builds "newc" cpio archives (the format the kernel's initramfs unpacker reads) in Java.
 *
 * <p>Each member: a 110-byte ASCII header {@code "070701"} followed by 13 eight-digit upper-case
 * hex fields (ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor,
 * rdevminor, namesize including the NUL, check = 0), the NUL-terminated name padded with NULs so
 * header + name is a multiple of 4, then the data padded to a multiple of 4. The archive ends with
 * a member named {@code TRAILER!!!}. Symlink data is the target path.
 */
public final class Initramfs {
    public static final int S_IFDIR = 0040000, S_IFREG = 0100000, S_IFLNK = 0120000, S_IFCHR = 0020000;
    public static final String TRAILER = "TRAILER!!!";

    /** One archive member. {@code mode} includes the file-type bits. */
    public record Entry(String path, int mode, byte[] data, int rdevMajor, int rdevMinor) {
        public Entry {
            path = normalize(path);
            data = data == null ? new byte[0] : data;
        }
        public boolean isDirectory() { return (mode & 0170000) == S_IFDIR; }
        public boolean isFile() { return (mode & 0170000) == S_IFREG; }
        public boolean isSymlink() { return (mode & 0170000) == S_IFLNK; }
        public boolean isCharDevice() { return (mode & 0170000) == S_IFCHR; }
        public String symlinkTarget() { return new String(data, StandardCharsets.UTF_8); }
    }

    private final List<Entry> entries = new ArrayList<>();
    private long mtime = 0;

    public Initramfs() {}

    /** Modification time stamped on every member (default 0, for reproducible archives). */
    public Initramfs mtime(long seconds) { this.mtime = seconds; return this; }

    public Initramfs dir(String path, int perm) { return add(new Entry(path, S_IFDIR | (perm & 07777), null, 0, 0)); }
    public Initramfs file(String path, int perm, byte[] data) { return add(new Entry(path, S_IFREG | (perm & 07777), data, 0, 0)); }
    public Initramfs file(String path, int perm, String text) { return file(path, perm, text.getBytes(StandardCharsets.UTF_8)); }
    public Initramfs symlink(String path, String target) { return add(new Entry(path, S_IFLNK | 0777, target.getBytes(StandardCharsets.UTF_8), 0, 0)); }
    public Initramfs charDevice(String path, int perm, int major, int minor) { return add(new Entry(path, S_IFCHR | (perm & 07777), null, major, minor)); }

    /** Adds an entry; an earlier non-directory entry with the same path is replaced. */
    public Initramfs add(Entry e) {
        if (e.path.isEmpty()) throw new IllegalArgumentException("the archive root itself cannot be an entry");
        if (!e.isDirectory()) entries.removeIf(x -> x.path.equals(e.path) && !x.isDirectory());
        entries.add(e);
        return this;
    }

    /** Entries in archive order, with missing parent directories (mode 0755) inserted first. */
    public List<Entry> entries() {
        List<Entry> out = new ArrayList<>();
        Set<String> dirs = new LinkedHashSet<>();
        for (Entry e : entries) if (e.isDirectory()) dirs.add(e.path);
        Set<String> emitted = new LinkedHashSet<>();
        for (Entry e : entries) {
            String parent = parentOf(e.path);
            List<String> missing = new ArrayList<>();
            while (!parent.isEmpty() && !emitted.contains(parent)) {
                missing.addFirst(parent);
                parent = parentOf(parent);
            }
            for (String m : missing) {
                if (dirs.contains(m)) {   // declared later: emit the declared entry now
                    Entry declared = entries.stream().filter(x -> x.path.equals(m) && x.isDirectory()).findFirst().orElseThrow();
                    out.add(declared);
                } else {
                    out.add(new Entry(m, S_IFDIR | 0755, null, 0, 0));
                }
                emitted.add(m);
            }
            if (e.isDirectory() && emitted.contains(e.path)) continue;
            out.add(e);
            if (e.isDirectory()) emitted.add(e.path);
        }
        return out;
    }

    /** The archive bytes. Inode numbers count from 1 in archive order. */
    public byte[] toBytes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int ino = 1;
        for (Entry e : entries()) {
            writeMember(out, ino++, e.mode, e.isDirectory() ? 2 : 1, mtime, e.data, e.rdevMajor, e.rdevMinor, e.path);
        }
        writeMember(out, 0, 0, 1, 0, new byte[0], 0, 0, TRAILER);
        return out.toByteArray();
    }

    /** Writes the archive atomically (temp file + rename, mode 0644). */
    public Path write(Path file) throws IOException {
        return GuestImages.writeAtomically(file, toBytes());
    }

    private static void writeMember(ByteArrayOutputStream out, int ino, int mode, int nlink, long mtime, byte[] data,
                                    int rdevMajor, int rdevMinor, String name) {
        byte[] nameBytes = name.getBytes(StandardCharsets.UTF_8);
        StringBuilder h = new StringBuilder(110).append("070701");
        for (long v : new long[]{ino, mode, 0, 0, nlink, mtime, data.length, 0, 0, rdevMajor, rdevMinor, nameBytes.length + 1, 0}) {
            h.append(String.format("%08X", v & 0xffffffffL));
        }
        out.writeBytes(h.toString().getBytes(StandardCharsets.US_ASCII));
        out.writeBytes(nameBytes);
        out.write(0);
        pad(out);
        out.writeBytes(data);
        pad(out);
    }

    private static void pad(ByteArrayOutputStream out) {
        while (out.size() % 4 != 0) out.write(0);
    }

    /** A member as read back from an archive. */
    public record Member(String name, int ino, int mode, int uid, int gid, int nlink, long mtime, byte[] data,
                         int devMajor, int devMinor, int rdevMajor, int rdevMinor) {}

    /** Reads a newc archive (up to and excluding the trailer); strict about format and alignment. */
    public static List<Member> read(byte[] a) throws KernelImageException {
        List<Member> out = new ArrayList<>();
        int p = 0;
        while (true) {
            if (p + 110 > a.length) throw new KernelImageException("cpio: truncated header at offset " + p);
            String magic = new String(a, p, 6, StandardCharsets.US_ASCII);
            if (!magic.equals("070701")) throw new KernelImageException("cpio: bad magic '" + magic + "' at offset " + p + " (not newc)");
            long[] f = new long[13];
            for (int i = 0; i < 13; i++) {
                String hex = new String(a, p + 6 + 8 * i, 8, StandardCharsets.US_ASCII);
                try {
                    f[i] = Long.parseLong(hex, 16);
                } catch (NumberFormatException e) {
                    throw new KernelImageException("cpio: bad hex field '" + hex + "' at offset " + (p + 6 + 8 * i));
                }
            }
            int namesize = (int) f[11];
            if (namesize < 1 || p + 110 + namesize > a.length) throw new KernelImageException("cpio: bad name size at offset " + p);
            String name = new String(a, p + 110, namesize - 1, StandardCharsets.UTF_8);
            if (a[p + 110 + namesize - 1] != 0) throw new KernelImageException("cpio: name not NUL-terminated at offset " + p);
            int dataAt = align4(p + 110 + namesize);
            int size = (int) f[6];
            if (dataAt + size > a.length) throw new KernelImageException("cpio: truncated data for " + name);
            if (name.equals(TRAILER)) return out;
            out.add(new Member(name, (int) f[0], (int) f[1], (int) f[2], (int) f[3], (int) f[4], f[5],
                    java.util.Arrays.copyOfRange(a, dataAt, dataAt + size), (int) f[7], (int) f[8], (int) f[9], (int) f[10]));
            p = align4(dataAt + size);
        }
    }

    private static int align4(int v) { return (v + 3) & ~3; }

    static String normalize(String path) {
        String p = path.replaceAll("/+", "/");
        while (p.startsWith("/")) p = p.substring(1);
        while (p.startsWith("./")) p = p.substring(2);
        if (p.endsWith("/")) p = p.substring(0, p.length() - 1);
        if (p.contains("/../") || p.startsWith("../") || p.equals("..")) throw new IllegalArgumentException("'..' in archive path " + path);
        return p;
    }

    private static String parentOf(String p) {
        int i = p.lastIndexOf('/');
        return i < 0 ? "" : p.substring(0, i);
    }

    // ---- the default guest initramfs ----

    /** Busybox applets linked in /bin of the default guest. */
    public static final List<String> APPLETS = List.of("sh", "ash", "mount", "umount", "cat", "ls", "echo", "sleep",
            "poweroff", "reboot", "mkdir", "rm", "date", "uname", "head", "sync", "dmesg", "touch", "mknod", "true", "false", "test", "[");

    /** Marker lines the default /init prints. */
    public static final String MARK_START = "KPEMU-INIT-START", MARK_DONE = "KPEMU-INIT-DONE", MARK_SLEEP = "KPEMU-SLEEP";

    /** The default /init: a busybox sh script. */
    public static String defaultInitScript() {
        return """
                #!/bin/sh
                # kpemu default guest init (busybox sh). Prints marker lines the emulator's tests look for.
                export PATH=/bin
                mkdir -p /proc /sys /tmp
                mount -t proc proc /proc
                mount -t sysfs sysfs /sys
                echo "%1$s"
                echo "kernel: $(cat /proc/version)"
                # small file-system workload on the initramfs rootfs
                echo "hello from kpemu" > /hello.txt
                cat /hello.txt
                mkdir -p /tmp/work
                echo one > /tmp/work/a.txt
                echo two >> /tmp/work/a.txt
                cat /tmp/work/a.txt
                ls /
                cat /proc/cmdline
                head -n 3 /proc/meminfo
                rm /tmp/work/a.txt
                echo "%2$s"
                cat /proc/interrupts
                u0=$(cat /proc/uptime); d0=$(date +%%s)
                sleep 1
                u1=$(cat /proc/uptime); d1=$(date +%%s)
                u0=${u0%%%% *}; u1=${u1%%%% *}
                c0=${u0%%.*}${u0#*.}; c1=${u1%%.*}${u1#*.}
                echo "%3$s uptime_before=$u0 uptime_after=$u1 elapsed_cs=$((10#$c1 - 10#$c0)) date_before=$d0 date_after=$d1"
                sync
                poweroff -f
                echo "KPEMU-POWEROFF-FAILED"
                while true; do sleep 1000; done
                """.formatted(MARK_START, MARK_DONE, MARK_SLEEP);
    }

    /** The default guest: /bin/busybox, applet symlinks, /dev/console (c 5 1), /proc, /sys, /tmp, /init. */
    public static Initramfs defaultGuest(byte[] busybox) {
        Initramfs r = new Initramfs()
                .dir("bin", 0755).dir("dev", 0755).dir("proc", 0555).dir("sys", 0555).dir("tmp", 01777).dir("root", 0700)
                .charDevice("dev/console", 0600, 5, 1)
                .file("bin/busybox", 0755, busybox);
        for (String a : APPLETS) r.symlink("bin/" + a, "busybox");
        r.file("init", 0755, defaultInitScript());
        return r;
    }
}
