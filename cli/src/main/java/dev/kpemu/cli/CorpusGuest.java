package dev.kpemu.cli;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.image.Initramfs;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.kprobes.events.ReferenceTrace;

/**
 * The guest of the differential corpus (issue 11): kpemu's default busybox guest whose /init first
 * sets up tracing, then runs the default workload unchanged, as process 1, up to its {@code sync};
 * the same archive boots under QEMU (Linux's own kprobe_events, {@code guest-images/record-corpus.sh})
 * and under kpemu ({@code CorpusTraceTest}), so both machines run the same commands on the same
 * files. The only difference is {@code /tmp/corpus/mode}:
 * <ul>
 * <li>{@code linux}: /init writes {@code /tmp/corpus/events} to tracefs' {@code kprobe_events}, one
 *     definition a write (a refused one prints {@code KPEMU-CORPUS-REFUSED} and its {@code error_log}
 *     lines, each after {@value #ERROR_LOG_LINE}; an fprobe {@code f…} or
 *     tracepoint probe {@code t…} goes to {@code dynamic_events}), and enables them;
 *     after the workload tracing stops and the {@code trace} file is printed between
 *     {@value #TRACE_BEGIN} and {@value #TRACE_END}.</li>
 * <li>{@code survey}: ftrace's function tracer runs over the workload; afterwards each traced
 *     function is printed with its number of calls and the number of those made outside the
 *     workload's own processes in task context (interrupts, softirqs, kernel threads).</li>
 * <li>{@code kpemu}: nothing is written to tracefs: kpemu registers the definitions itself
 *     ({@code --from-init}, before /init runs).</li>
 * </ul>
 * The events compared are those of the workload's window ({@link #window}): from the workload's
 * {@code mount -t proc} on (a {@code path_mount} event, {@value #MARK_MOUNT}) to the exec of
 * {@code /tmp/corpus/after} (a {@code bprm_execve} event, {@value #MARK_EXEC}). The set-up before
 * it differs between the machines (Linux writes its tracefs there); nothing in the window does.
 */
public final class CorpusGuest {
    private CorpusGuest() {}

    public static final String TRACE_BEGIN = "KPEMU-CORPUS-TRACE-BEGIN", TRACE_END = "KPEMU-CORPUS-TRACE-END";
    public static final String SURVEY_LINE = "KPEMU-SURVEY", REFUSED = "KPEMU-CORPUS-REFUSED";
    /** Around the text of a tracefs file whose write Linux refused (a bad filter: the file shows the error), and of each {@code hist} file. */
    public static final String SETUP_REFUSED = "KPEMU-SETUP-REFUSED", SETUP_REFUSED_END = "KPEMU-SETUP-REFUSED-END",
            HIST_BEGIN = "KPEMU-HIST-BEGIN", HIST_END = "KPEMU-HIST-END", ERROR_LOG_LINE = "KPEMU-ERROR-LOG";
    /** The window's marker events, defined first in every corpus. */
    public static final String MARK_MOUNT = "corpus_mount", MARK_EXEC = "corpus_exec";

    /**
     * The marker definitions for {@code arch} ("x86_64" or "arm64") on the kernel whose BTF is
     * {@code btf}. {@code bprm_execve} names the executed file differently by version: 6.1's
     * {@code bprm_execve(bprm, fd, filename, flags)} gets it as its third argument (a
     * {@code struct filename}, whose first member is the name); later kernels'
     * {@code bprm_execve(bprm)} only through {@code bprm->filename}.
     */
    public static List<String> markers(String arch, Btf btf) {
        boolean x86 = arch.equals("x86_64");
        String first = x86 ? "%di" : "%x0", third = x86 ? "%dx" : "%x2";
        boolean filenameArgument = btf.funcProto("bprm_execve").map(p -> p.params().size() >= 3).orElse(true);
        String file = filenameArgument ? "+0(+0(" + third + "))"
                : "+0(+" + btf.offsetOf("linux_binprm", "filename").offset() + "(" + first + "))";
        return List.of(
                // path_mount(dev_name, path, type_page, flags, data_page)
                "p:" + MARK_MOUNT + " path_mount type=+0(" + third + "):string",
                "p:" + MARK_EXEC + " bprm_execve file=" + file + ":string");
    }

    /** The process-1 script: tracing set-up by mode, then the workload. */
    public static String initScript() {
        return """
                #!/bin/sh
                # kpemu corpus guest (dev.kpemu.cli.CorpusGuest): set-up, then the default workload as process 1
                export PATH=/bin
                mount -t tracefs tracefs /root
                read mode < /tmp/corpus/mode
                if [ "$mode" = linux ]; then
                  echo 8192 > /root/buffer_size_kb
                  while IFS= read -r d; do
                    case "$d" in f*|t*) f=dynamic_events ;; *) f=kprobe_events ;; esac
                    : > /root/error_log
                    printf '%%s\\n' "$d" >> /root/$f || {
                      printf '%%s %%s\\n' KPEMU-CORPUS-REFUSED "$d"
                      while IFS= read -r l; do echo "%3$s $l"; done < /root/error_log
                    }
                  done < /tmp/corpus/events
                  echo 1 > /root/events/kprobes/enable
                  if [ -d /root/events/fprobes ]; then echo 1 > /root/events/fprobes/enable; fi
                  if [ -d /root/events/tracepoints ]; then echo 1 > /root/events/tracepoints/enable; fi
                  if [ -s /tmp/corpus/settle ]; then read s < /tmp/corpus/settle; read -t "$s" _ < /dev/console || :; fi
                  if [ -s /tmp/corpus/setup ]; then
                    while IFS='\t' read -r f v; do
                      : > /root/error_log
                      printf '%%s\\n' "$v" >> /root/$f || {
                        printf '%%s %%s\\t%%s\\n' %1$s "$f" "$v"
                        [ -e /tmp/corpus/read-refused ] && busybox cat /root/$f
                        while IFS= read -r l; do echo "%3$s $l"; done < /root/error_log
                        echo %2$s
                      }
                    done < /tmp/corpus/setup
                  fi
                elif [ "$mode" = survey ]; then
                  echo 98304 > /root/buffer_size_kb
                  echo function > /root/current_tracer
                fi
                exec /bin/sh /tmp/corpus/workload
                """.formatted(SETUP_REFUSED, SETUP_REFUSED_END, ERROR_LOG_LINE);
    }

    /** Run by exec at the end of the workload (the window's end): prints Linux's trace, powers off. */
    public static String afterScript() {
        return """
                #!/bin/sh
                read mode < /tmp/corpus/mode
                if [ "$mode" = linux ]; then
                  echo 0 > /root/tracing_on
                  echo %1$s
                  busybox cat /root/trace
                  echo %2$s
                  if [ -s /tmp/corpus/setup ]; then
                    for h in /root/events/kprobes/*/hist; do echo %4$s ${h#/root/}; busybox cat $h; echo %5$s; done
                  fi
                elif [ "$mode" = survey ]; then
                  echo 0 > /root/tracing_on
                  busybox awk '!/^#/ && NF >= 5 { f = $5; n[f]++; c = $1; sub(/-[0-9]+$/, "", c);
                    if (substr($3, 3, 1) != "." || c !~ /^(init|sh|mkdir|mount|cat|ls|head|rm|sleep|date|sync|echo|uname|touch)$/) o[f]++ }
                    END { for (f in n) print "%3$s", f, n[f], o[f] + 0 }' /root/trace
                  echo %2$s
                fi
                poweroff -f
                """.formatted(TRACE_BEGIN, TRACE_END, SURVEY_LINE, HIST_BEGIN, HIST_END);
    }

    /** The default workload ({@link Initramfs#defaultInitScript}) up to its {@code sync}, then {@code exec /tmp/corpus/after}. */
    public static String workloadScript() {
        String s = Initramfs.defaultInitScript();
        int i = s.indexOf("\nsync\n");
        if (i < 0) throw new IllegalStateException("the default workload has no 'sync' line");
        return s.substring(0, i) + "\nsync\nexec /tmp/corpus/after\n";
    }

    /** The archive: the default guest, /init replaced, /tmp/corpus/{mode,events,workload,after}. */
    public static Initramfs archive(byte[] busybox, String mode, List<String> definitions) {
        return archive(busybox, mode, definitions, List.of());
    }

    /**
     * As {@link #archive(byte[], String, List)}, with tracefs writes done after the events are
     * enabled (mode linux): each {@code setup} entry is {@code FILE<TAB>TEXT}, FILE relative to
     * tracefs ({@code events/kprobes/myopen/filter}, {@code .../trigger}, {@code .../enable}),
     * appended in order; a refused write prints {@value #SETUP_REFUSED} FILE<TAB>TEXT, the
     * {@code error_log} entries the write made (cleared before each write; each line after
     * {@value #ERROR_LOG_LINE}) and {@value #SETUP_REFUSED_END}. The set-up runs no program (the
     * shell's own {@code read}), so the workload's processes get the pids they get under kpemu; with
     * {@code readRefused} it also prints each refused file's text (a bad filter's error) with
     * {@code busybox cat}, which moves the later pids (tracefs' filter file reads only at offset 0,
     * so the shell's byte-wise {@code read} cannot read it). With a setup, the after script
     * also prints every kprobe event's {@code hist} file between {@value #HIST_BEGIN} NAME and
     * {@value #HIST_END}. The after script reads tracefs as {@code busybox cat} (task comm
     * {@code busybox}, which the workload never runs) so filters can leave those reads out:
     * Linux's hist triggers still fire after {@code tracing_on} is cleared.
     */
    public static Initramfs archive(byte[] busybox, String mode, List<String> definitions, List<String> setup) {
        return archive(busybox, mode, definitions, setup, false);
    }

    /** As {@link #archive(byte[], String, List, List)}; {@code readRefused}: print each refused file's text too. */
    public static Initramfs archive(byte[] busybox, String mode, List<String> definitions, List<String> setup, boolean readRefused) {
        return archive(busybox, mode, definitions, setup, readRefused, 0);
    }

    /**
     * As {@link #archive(byte[], String, List, List, boolean)}; mode linux with {@code settleSeconds}
     * &gt; 0 (kpemu fuzz): after enabling the events /init sleeps that long (the shell's own
     * {@code read -t} on the console: no program runs, so the pids stay kpemu's) before the workload,
     * so that Linux's kprobe optimizer (OPTIMIZE_DELAY, then an RCU-tasks grace period) has made its
     * jumps before the window as kpemu's are; a small set's writes take too little time for that.
     */
    public static Initramfs archive(byte[] busybox, String mode, List<String> definitions, List<String> setup, boolean readRefused,
                                    int settleSeconds) {
        if (!List.of("linux", "survey", "kpemu").contains(mode)) throw new IllegalArgumentException("mode " + mode);
        Initramfs r = Initramfs.defaultGuest(busybox);
        r.file("init", 0755, initScript());
        r.dir("tmp/corpus", 0755);
        r.file("tmp/corpus/mode", 0644, mode + "\n");
        r.file("tmp/corpus/events", 0644, mode.equals("linux") ? String.join("\n", definitions) + "\n" : "");
        r.file("tmp/corpus/workload", 0755, workloadScript());
        r.file("tmp/corpus/after", 0755, afterScript());
        r.file("tmp/corpus/setup", 0644, setup.isEmpty() || !mode.equals("linux") ? "" : String.join("\n", setup) + "\n");
        if (readRefused) r.file("tmp/corpus/read-refused", 0644, "");
        if (settleSeconds > 0 && mode.equals("linux")) r.file("tmp/corpus/settle", 0644, settleSeconds + "\n");
        return r;
    }

    /**
     * The workload's own tasks: the commands it runs (the survey's list in {@link #afterScript}),
     * and {@code exe}: busybox's shell runs an applet through {@code /proc/self/exe}, so the task
     * is named {@code exe} between that exec and the applet's (kpemu names a task as it was at the
     * event; Linux's trace file names it by the pid's last name, {@code cat}), and {@code after},
     * which Linux's trace file names process 1 by once it executed the window's end. Kernel threads that
     * run inside the window (a crypto self-test's {@code cryptomgr_test} exiting, on kpemu's 6.12
     * and 7.2 boots but before the workload under QEMU) run when the machine's timing says.
     */
    public static final java.util.Set<String> WORKLOAD_TASKS = java.util.Set.of(
            "init", "sh", "mkdir", "mount", "cat", "ls", "head", "rm", "sleep", "date", "sync", "echo", "uname", "touch", "exe", "after");

    /**
     * The workload's window of a trace: from the first {@value #MARK_MOUNT} event of type "proc"
     * (the workload's {@code mount -t proc}) up to, not including, the {@value #MARK_EXEC} event of
     * {@code /tmp/corpus/after}, only events of the workload's own tasks ({@link #WORKLOAD_TASKS};
     * events without a task column are kept). Empty when a marker is missing.
     */
    public static List<ReferenceTrace.Event> window(List<ReferenceTrace.Event> events) {
        int start = -1, end = -1;
        for (int i = 0; i < events.size(); i++) {
            ReferenceTrace.Event e = events.get(i);
            if (start < 0 && e.name().equals(MARK_MOUNT) && arg(e, "type").equals("\"proc\"")) start = i;
            else if (start >= 0 && e.name().equals(MARK_EXEC) && arg(e, "file").equals("\"/tmp/corpus/after\"")) {
                end = i;
                break;
            }
        }
        if (start < 0 || end < 0) return List.of();
        List<ReferenceTrace.Event> w = new ArrayList<>();
        for (ReferenceTrace.Event e : events.subList(start, end)) {
            if (e.context() == null || WORKLOAD_TASKS.contains(e.context().comm())) w.add(e);
        }
        return w;
    }

    private static String arg(ReferenceTrace.Event e, String name) {
        for (ReferenceTrace.Arg a : e.args()) if (a.name().equals(name)) return a.value();
        return "";
    }
}
