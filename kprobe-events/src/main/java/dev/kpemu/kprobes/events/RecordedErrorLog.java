package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.Errno;

/**
 * Linux's own answers to kprobe_events writes, as {@code guest-images/record-error-log.sh}
 * records them under QEMU: for each definition (written alone to an empty kprobe_events), the
 * write's outcome, the {@code error_log} entry, the {@code kprobe_events} listing after an
 * accepted write, what the kernel printed on its console about it and, when recorded with
 * {@code --kprobes-list}, debugfs {@code kprobes/list} once the event was enabled.
 */
public record RecordedErrorLog(String kernel, List<Answer> answers) {
    /**
     * One definition's answer.
     *
     * @param errno    null when the write was accepted
     * @param errorLog error_log lines without the timestamp (message, {@code "  Command: ..."}, caret line)
     * @param listing  kprobe_events lines after the write
     * @param console  {@code trace_kprobe: ...} lines the kernel printed
     * @param kprobesList {@code kprobes/list} lines once the event was enabled (empty when not recorded)
     */
    public record Answer(String definition, Errno errno, List<String> errorLog, List<String> listing, List<String> console,
                         List<String> kprobesList) {
        public boolean accepted() { return errno == null; }
    }

    public static RecordedErrorLog read(Path file) throws IOException {
        String kernel = "?";
        List<Answer> out = new ArrayList<>();
        String def = null;
        Errno errno = null;
        List<String> log = new ArrayList<>(), listing = new ArrayList<>(), console = new ArrayList<>(), kprobesList = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            if (line.startsWith("# kernel: ")) kernel = line.substring("# kernel: ".length()).split(" ")[0];
            if (line.length() < 2 || line.charAt(1) != ' ' || line.startsWith("#")) continue;
            String body = line.substring(2);
            switch (line.charAt(0)) {
                case '>' -> {
                    if (def != null) out.add(new Answer(def, errno, List.copyOf(log), List.copyOf(listing), List.copyOf(console), List.copyOf(kprobesList)));
                    def = body;
                    errno = null;
                    log.clear(); listing.clear(); console.clear(); kprobesList.clear();
                }
                case '<' -> errno = body.equals("ok") ? null : errnoOf(body, file);
                case '!' -> log.add(body);
                case '=' -> listing.add(body);
                case '~' -> console.add(body);
                case '@' -> kprobesList.add(body);
                default -> throw new IOException(file + ": unknown line kind: " + line);
            }
        }
        if (def != null) out.add(new Answer(def, errno, List.copyOf(log), List.copyOf(listing), List.copyOf(console), List.copyOf(kprobesList)));
        return new RecordedErrorLog(kernel, List.copyOf(out));
    }

    /** The errno of a C library {@code strerror} text (what busybox printed for the failed write). */
    static Errno errnoOf(String strerror, Path file) throws IOException {
        return switch (strerror) {
            case "No such file or directory" -> Errno.ENOENT;
            case "Argument list too long" -> Errno.E2BIG;
            case "Out of memory", "Cannot allocate memory" -> Errno.ENOMEM;
            case "Device or resource busy", "Resource busy" -> Errno.EBUSY;
            case "File exists" -> Errno.EEXIST;
            case "Not a directory" -> Errno.ENOTDIR;
            case "Too many levels of symbolic links", "Symbolic link loop" -> Errno.ELOOP;
            case "Invalid argument" -> Errno.EINVAL;
            case "No space left on device" -> Errno.ENOSPC;
            case "Result not representable", "Numerical result out of range" -> Errno.ERANGE;
            case "Invalid or incomplete multibyte or wide character", "Illegal byte sequence" -> Errno.EILSEQ;
            case "Operation not supported", "Not supported" -> Errno.EOPNOTSUPP;
            case "Cannot assign requested address", "Address not available" -> Errno.EADDRNOTAVAIL;
            default -> throw new IOException(file + ": unknown errno text '" + strerror + "'");
        };
    }
}
