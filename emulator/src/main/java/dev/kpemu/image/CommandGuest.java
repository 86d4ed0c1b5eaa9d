package dev.kpemu.image;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.kpemu.machine.Arch;

/**
 * The initramfs of {@code kpemu boot -- CMD [ARGS…]}: kpemu's busybox guest with an /init that
 * mounts proc, sysfs, devtmpfs, a tmpfs on /tmp, tracefs and debugfs, installs every busybox
 * applet in /bin, runs the command on the terminal UART ({@code ttyS1} / {@code ttyAMA1}: its
 * stdout and stderr, and its stdin in a terminal session), reports its exit status and powers off.
 *
 * <p><b>The exit status</b> travels on the kernel's console, not on the command's terminal: /init
 * writes {@value #EXIT_MARKER}{@code N} to {@code /dev/kmsg} at level 0 after the command ended and
 * its terminal was closed (which waits until its output has left the UART). A kmsg record is printed
 * by the console driver as one piece, so nothing the kernel or the command prints can split it, and
 * the command's own output (on the other UART) can never be taken for it. The host reads the first
 * such line ({@link #exitStatus}).
 *
 * <p>Two ways to run the command: <b>batch</b> (stdin {@code /dev/null}, the terminal without echo
 * and without the CR a tty adds before each LF, so the output arrives as the program wrote it) and
 * <b>terminal</b> (a new session whose controlling terminal is the UART, cooked mode: line editing,
 * echo, Ctrl-C sends SIGINT to the foreground job), for {@code -i} and replayed input. With no
 * command the terminal session runs busybox's shell.
 */
public final class CommandGuest {
    /** The line /init writes to the kernel log with the command's exit status. */
    public static final String EXIT_MARKER = "KPEMU-EXIT-STATUS=";
    /** The line /init writes to the kernel log when the command's terminal device is missing. */
    public static final String NO_TERMINAL = "KPEMU-NO-TERMINAL";
    private static final Pattern STATUS = Pattern.compile(Pattern.quote(EXIT_MARKER) + "(\\d{1,3})\\b");

    private CommandGuest() {}

    /** kpemu's busybox guest whose /init runs {@code command} (empty: a shell, terminal sessions only). */
    public static Initramfs initramfs(byte[] busybox, Arch arch, List<String> command, boolean terminalSession) {
        Initramfs r = Initramfs.defaultGuest(busybox);
        r.file("init", 0755, initScript(arch, command, terminalSession));
        return r;
    }

    /** The /init script. */
    public static String initScript(Arch arch, List<String> command, boolean terminalSession) {
        if (command.isEmpty() && !terminalSession) throw new IllegalArgumentException("a batch run needs a command");
        String tty = terminalDevice(arch);
        String cmd = command.isEmpty() ? "sh" : String.join(" ", command.stream().map(CommandGuest::quote).toList());
        String run = terminalSession
                ? """
                  stty -F %1$s sane
                  setsid -c %2$s <%1$s >%1$s 2>&1
                  rc=$?
                  """.formatted(tty, cmd)
                : """
                  exec 3<>%1$s
                  stty -onlcr -echo <&3
                  %2$s </dev/null >&3 2>&3 3>&-
                  rc=$?
                  exec 3>&-
                  """.formatted(tty, cmd);
        return """
                #!/bin/sh
                # kpemu command guest (kpemu boot -- CMD): mounts, runs the command on %1$s, reports its
                # exit status on the kernel log, powers off.
                export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=linux
                /bin/busybox --install -s /bin
                mkdir -p /proc /sys /dev /tmp /root
                mount -t proc proc /proc
                mount -t sysfs sysfs /sys
                mount -t devtmpfs devtmpfs /dev
                mount -t tmpfs tmpfs /tmp
                mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
                mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
                cd /root
                echo "%2$s"
                if [ ! -c %1$s ]; then
                    echo "<0>%5$s %1$s: the kernel found no second serial port (or no devtmpfs)" > /dev/kmsg
                    poweroff -f
                fi
                %3$s
                echo "<0>%4$s$rc" > /dev/kmsg
                poweroff -f
                """.formatted(tty, Initramfs.MARK_START, run.strip(), EXIT_MARKER, NO_TERMINAL);
    }

    /**
     * The kernel command line of a command boot: {@code append} as given, with the arch's console
     * on the first UART added when it names none ({@code console=ttyS0} / {@code console=ttyAMA0}):
     * the command's exit status comes back on that console.
     */
    public static String commandLine(Arch arch, String append) {
        if (append == null || append.matches("(^|.*\\s)console=.*")) return append;
        return append.strip() + (arch == Arch.X86_64 ? " console=ttyS0" : " console=ttyAMA0");
    }

    /** The terminal UART's device in the guest. */
    public static String terminalDevice(Arch arch) {
        return arch == Arch.X86_64 ? "/dev/ttyS1" : "/dev/ttyAMA1";
    }

    /** The exit status in a console line that carries {@value #EXIT_MARKER}, or null (no line, or no number). */
    public static Integer exitStatus(String consoleLine) {
        if (consoleLine == null) return null;
        Matcher m = STATUS.matcher(consoleLine);
        return m.find() ? Integer.valueOf(m.group(1)) : null;
    }

    /** One shell word: single-quoted, a quote inside written as {@code '\''}. */
    static String quote(String arg) {
        return "'" + arg.replace("'", "'\\''") + "'";
    }
}
