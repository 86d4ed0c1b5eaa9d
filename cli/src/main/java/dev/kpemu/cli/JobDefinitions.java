package dev.kpemu.cli;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The definitions of {@code kpemu bench job} ({@code guest-images/reference/job.ARCH.events}) in
 * both sides' dialects: kpemu takes the file as written (a glob is kpemu's extension); Linux's
 * kprobe_events takes one definition a line and no glob, so the QEMU side gets the listing of
 * {@code kpemu check-events} on the same kernel: every definition as Linux lists it, every glob
 * written out one definition per function it accepts. Both sides probe the same functions.
 */
final class JobDefinitions {
    private static final Pattern HEAD = Pattern.compile("([pr])(\\d*)(?::(?:([^/\\s]*)/)?([^\\s/]*))?");

    private JobDefinitions() {}

    /** The definitions of a kpemu events file: comments ({@code #} to the line's end) and blank lines dropped. */
    static List<String> parse(String text) {
        List<String> out = new ArrayList<>();
        for (String line : text.split("\n")) {
            String d = line.replaceAll("#.*", "").strip();
            if (!d.isEmpty()) out.add(d);
        }
        return out;
    }

    /**
     * The groups the Linux listing's definitions create (each enabled by the guest's init), sorted;
     * {@code kprobes} for a definition that names none. A line that is no kprobe definition is an error.
     */
    static List<String> groups(List<String> linux) {
        TreeSet<String> g = new TreeSet<>();
        for (String d : linux) {
            Matcher m = HEAD.matcher(d.strip().split("\\s+", 2)[0]);
            if (!m.matches()) throw new IllegalArgumentException("not a kprobe definition: " + d);
            g.add(m.group(3) == null || m.group(3).isEmpty() ? "kprobes" : m.group(3));
        }
        return List.copyOf(g);
    }

    /**
     * Checks that the Linux listing probes what the kpemu file does: one line per single definition
     * (each event's name kept) and at least one per glob. Throws with a one-line reason otherwise.
     */
    static void checkListing(List<String> kpemu, List<String> linux) {
        long globs = kpemu.stream().filter(dev.kpemu.kprobes.events.ProbeGlob::isGlob).count();
        long singles = kpemu.size() - globs;
        if (linux.size() < singles + globs)
            throw new IllegalArgumentException("the Linux listing has " + linux.size() + " definitions for " + singles
                    + " single definitions and " + globs + " globs");
        for (String d : kpemu) {
            if (dev.kpemu.kprobes.events.ProbeGlob.isGlob(d)) continue;
            Matcher m = HEAD.matcher(d.split("\\s+", 2)[0]);
            String event = m.matches() ? m.group(4) : null;
            if (event == null || event.isEmpty()) continue;
            boolean listed = linux.stream().anyMatch(l -> l.split("\\s+", 2)[0].matches("[pr]\\d*:[^/]*/" + Pattern.quote(event)));
            if (!listed) throw new IllegalArgumentException("the Linux listing lacks the event " + event + " of: " + d);
        }
    }
}
