package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Linux's answers to refused tracefs writes, recorded under QEMU by
 * {@code guest-images/record-filters.sh} ({@code reference/ARCH/SERIES/NAME.filter-errors}):
 * for each write ({@code ## refused FILE<TAB>TEXT}) the file's text read back afterwards (a
 * filter file shows the parse error) and the {@code error_log} entries the write made
 * ({@code ## error_log}, timestamps removed).
 */
public record RecordedSetupErrors(List<Refusal> refusals) {
    /** One refused write: the tracefs file (relative), the text written, the file's text afterwards, the error_log lines. */
    public record Refusal(String file, String text, String fileText, String errorLog) {
        /** The event, {@code GROUP/EVENT}, of an {@code events/GROUP/EVENT/FILE} path. */
        public String event() {
            String[] p = file.split("/");
            return p[1] + "/" + p[2];
        }

        /** The last part of the path: {@code filter}, {@code trigger}, {@code enable}. */
        public String kind() { return file.substring(file.lastIndexOf('/') + 1); }
    }

    public static RecordedSetupErrors read(Path file) throws IOException {
        List<Refusal> out = new ArrayList<>();
        String f = null, t = null;
        StringBuilder text = new StringBuilder(), log = new StringBuilder();
        boolean inLog = false;
        for (String l : Files.readAllLines(file)) {
            if (l.startsWith("## refused ")) {
                if (f != null) out.add(new Refusal(f, t, text.toString(), log.toString()));
                String[] ft = l.substring("## refused ".length()).split("\t", 2);
                f = ft[0];
                t = ft.length > 1 ? ft[1] : "";
                text.setLength(0);
                log.setLength(0);
                inLog = false;
            } else if (f == null) {
                continue;   // the header
            } else if (l.equals("## error_log")) {
                inLog = true;
            } else {
                (inLog ? log : text).append(l).append('\n');
            }
        }
        if (f != null) out.add(new Refusal(f, t, text.toString(), log.toString()));
        return new RecordedSetupErrors(List.copyOf(out));
    }

    /** Whether {@code text} written to {@code file} was refused. */
    public boolean refused(String file, String text) {
        for (Refusal r : refusals) if (r.file.equals(file) && r.text.equals(text)) return true;
        return false;
    }
}
