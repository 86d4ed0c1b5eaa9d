package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class InitramfsTest {

    private static String ascii(byte[] a, int from, int len) { return new String(a, from, len, StandardCharsets.US_ASCII); }

    /** Expected header written by hand from the newc spec (110 bytes: magic + 13 x 8 hex digits). */
    private static String header(int ino, int mode, int nlink, int filesize, int rmaj, int rmin, int namesize) {
        return "070701"
                + "%08X".formatted(ino) + "%08X".formatted(mode) + "00000000" + "00000000" + "%08X".formatted(nlink)
                + "00000000" + "%08X".formatted(filesize) + "00000000" + "00000000" + "%08X".formatted(rmaj)
                + "%08X".formatted(rmin) + "%08X".formatted(namesize) + "00000000";
    }

    @Test
    void byteExactNewcLayout() throws Exception {
        byte[] a = new Initramfs().dir("dev", 0755).file("hi", 0644, "abcde").symlink("sh", "busybox")
                .charDevice("dev/console", 0600, 5, 1).toBytes();
        int p = 0;
        // "dev": dir 040755, nlink 2, namesize 4 -> 110+4 = 114 -> padded to 116
        assertEquals(header(1, 040755, 2, 0, 0, 0, 4), ascii(a, p, 110));
        assertEquals("dev\0", ascii(a, p + 110, 4));
        assertEquals(0, a[p + 114]); assertEquals(0, a[p + 115]);
        p += 116;
        // "hi": file 0100644, 5 bytes, namesize 3 -> 113 -> 116; data 5 -> 8
        assertEquals(header(2, 0100644, 1, 5, 0, 0, 3), ascii(a, p, 110));
        assertEquals("hi\0", ascii(a, p + 110, 3));
        p += 116;
        assertEquals("abcde\0\0\0", ascii(a, p, 8));
        p += 8;
        // "sh" -> busybox: symlink 0120777, data = target (7 bytes -> 8)
        assertEquals(header(3, 0120777, 1, 7, 0, 0, 3), ascii(a, p, 110));
        p += 116;
        assertEquals("busybox\0", ascii(a, p, 8));
        p += 8;
        // "dev/console": char device 020600, rdev 5:1, namesize 12 -> 122 -> 124
        assertEquals(header(4, 020600, 1, 0, 5, 1, 12), ascii(a, p, 110));
        assertEquals("dev/console\0", ascii(a, p + 110, 12));
        p += 124;
        // trailer: ino 0, mode 0, nlink 1, namesize 11 -> 121 -> 124
        assertEquals(header(0, 0, 1, 0, 0, 0, 11), ascii(a, p, 110));
        assertEquals("TRAILER!!!\0", ascii(a, p + 110, 11));
        p += 124;
        assertEquals(p, a.length);
        assertEquals(0, a.length % 4);
    }

    @Test
    void roundTripAndParentDirectories() throws Exception {
        byte[] big = new byte[1001];
        for (int i = 0; i < big.length; i++) big[i] = (byte) (i * 7);
        Initramfs r = new Initramfs().mtime(1234).file("/usr/lib/x/data.bin", 0600, big).symlink("bin/sh", "busybox").dir("/usr", 0700);
        List<Initramfs.Member> m = Initramfs.read(r.toBytes());
        assertEquals(List.of("usr", "usr/lib", "usr/lib/x", "usr/lib/x/data.bin", "bin", "bin/sh"), m.stream().map(Initramfs.Member::name).toList());
        assertEquals(040700, m.get(0).mode(), "declared mode of usr is kept though it is emitted early");
        assertEquals(040755, m.get(1).mode());
        assertArrayEquals(big, m.get(3).data());
        assertEquals(1234, m.get(3).mtime());
        assertEquals("busybox", new String(m.get(5).data(), StandardCharsets.UTF_8));
        for (int i = 0; i < m.size(); i++) assertEquals(i + 1, m.get(i).ino());
    }

    @Test
    void badArchivesAreRejected() {
        byte[] good = new Initramfs().file("a", 0644, "x").toBytes();
        byte[] bad = good.clone();
        bad[5] = '2'; // "070702" is the crc format
        assertTrue(assertThrows(KernelImageException.class, () -> Initramfs.read(bad)).getMessage().contains("not newc"));
        assertThrows(KernelImageException.class, () -> Initramfs.read(java.util.Arrays.copyOf(good, 100)));
        assertThrows(IllegalArgumentException.class, () -> new Initramfs().file("../x", 0644, "y"));
    }

    @Test
    void defaultGuestHasInitBusyboxAppletsAndConsole() throws Exception {
        byte[] fakeBusybox = "not really busybox".getBytes(StandardCharsets.US_ASCII);
        List<Initramfs.Member> m = Initramfs.read(Initramfs.defaultGuest(fakeBusybox).toBytes());
        var byName = new java.util.HashMap<String, Initramfs.Member>();
        m.forEach(x -> byName.put(x.name(), x));
        assertEquals(0100755, byName.get("bin/busybox").mode());
        assertArrayEquals(fakeBusybox, byName.get("bin/busybox").data());
        for (String a : List.of("sh", "mount", "cat", "ls", "echo", "sleep", "poweroff", "mkdir", "date")) {
            assertEquals(0120777, byName.get("bin/" + a).mode(), a);
            assertEquals("busybox", new String(byName.get("bin/" + a).data(), StandardCharsets.UTF_8));
        }
        Initramfs.Member console = byName.get("dev/console");
        assertEquals(020600, console.mode());
        assertEquals(5, console.rdevMajor());
        assertEquals(1, console.rdevMinor());
        String init = new String(byName.get("init").data(), StandardCharsets.UTF_8);
        assertEquals(0100755, byName.get("init").mode());
        assertTrue(init.startsWith("#!/bin/sh\n"));
        for (String s : List.of("mount -t proc proc /proc", "mount -t sysfs sysfs /sys", "KPEMU-INIT-DONE", "cat /proc/interrupts",
                "sleep 1", "/proc/uptime", "date +%s", "poweroff -f", "/hello.txt")) {
            assertTrue(init.contains(s), "init contains " + s);
        }
        assertTrue(init.indexOf("KPEMU-INIT-DONE") < init.indexOf("cat /proc/interrupts"));
    }
}
