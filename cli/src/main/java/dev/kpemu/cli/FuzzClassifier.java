package dev.kpemu.cli;

import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Classifies a difference {@code kpemu fuzz} found ({@link FuzzDifference}). A difference is a kpemu
 * defect unless evidence says otherwise; the evidence, in this order:
 * <ol>
 * <li><b>Linux's own flakiness</b>: a second QEMU run of the same set differs from the first at the
 *     same place (the same definition's acceptance, or the same event index and field), or kpemu's
 *     value is what Linux's second run printed there.</li>
 * <li><b>Left out of the corpus</b> ({@code --include-left-out}): the definition is of a form
 *     {@link CorpusGenerator} leaves out (a register at a mid-function probe) or probes a function it leaves out, for the reason its class comment gives (machine paths,
 *     functions called outside the workload's task context, or too often).</li>
 * <li><b>Machine-dependent</b>, with its evidence: both values are addresses of per-boot allocations
 *     (the direct map, vmalloc or module space: heap, stacks, per-CPU data, which depend on RAM size
 *     and the slab's random freelists); the function runs outside the workload's task context in
 *     Linux's own survey (interrupts, timers, kernel threads run when each machine's clock says); a
 *     return probe whose return address Linux printed as the return trampoline and kpemu as the real
 *     caller (the probe out of instances, which an exiting task returns one RCU grace period later,
 *     {@code CorpusTraceTest}); a string that is a pid on both sides (a /proc/PID name: the pids follow the
 *     kernel threads each machine started); a latency column showing Linux's breakpoint path (x86-64 int3: 'Z') where
 *     kpemu's probe was already a jump (Linux's optimizer runs OPTIMIZE_DELAY after registration, on the
 *     guest's clock: a small set's first events can come before it).</li>
 * <li>Otherwise a <b>kpemu defect</b>.</li>
 * </ol>
 * The class's key is its category, the kind of difference, the field and the function: two
 * differences of one key are one class, with one minimal reproduction.
 */
public final class FuzzClassifier {
    /** The categories, from the report's point of view. */
    public enum Category {
        KPEMU_DEFECT("kpemu defect"), MACHINE("machine-dependent"), LINUX_FLAKY("Linux's own flakiness"), LEFT_OUT("left-out class");

        final String label;

        Category(String label) { this.label = label; }

        public String label() { return label; }
    }

    /** A classified difference: the category, why, and the class's key. */
    public record Classified(Category category, String reason, String key, FuzzDifference difference) {}

    /**
     * What the classifier knows besides the difference.
     *
     * @param secondLinux  Linux's second run of the set compared with its first (null: not run)
     * @param surveyOutside per function, how many of its calls the survey saw outside the workload's task context
     * @param surveyCalls   per function, its calls in the survey
     * @param leftOut       functions the corpus leaves out, and definitions of a form it leaves out, with the generator's reason
     */
    public record Evidence(List<FuzzDifference> secondLinux, Map<String, Long> surveyOutside, Map<String, Long> surveyCalls,
                           Map<String, String> leftOut) {
        public static final Evidence NONE = new Evidence(null, Map.of(), Map.of(), Map.of());
    }

    /** A kernel address of a per-boot allocation: x86-64's direct map, vmalloc and vmemmap; arm64's linear map and vmalloc. */
    static final Pattern PER_BOOT_ADDRESS = Pattern.compile("^0x(ffff8[89a-f]|ffffc[0-9a-f]|ffffe[0-9a-f]|ffff0|ffff80)[0-9a-f]*$");
    /** A string argument that is a pid: a /proc/PID entry's name. */
    static final Pattern PID_NAME = Pattern.compile("^\"[1-9][0-9]{0,6}\"$");
    static final Pattern RETURN_TRAMPOLINE = Pattern.compile("^(arch_rethook_trampoline|__kretprobe_trampoline|kretprobe_trampoline)\\+0x0/");

    private FuzzClassifier() {}

    public static Classified classify(FuzzDifference d, Evidence ev) {
        if (ev.secondLinux() != null) {
            for (FuzzDifference s : ev.secondLinux()) {
                boolean samePlace = d.kind().equals("event") ? s.kind().equals("event") && s.index() == d.index() && s.field().equals(d.field())
                        : !s.kind().equals("event") && s.definition().equals(d.definition());
                boolean kpemuIsLinuxs = d.kind().equals("event") && samePlace && s.kpemu().equals(d.kpemu());
                if (samePlace || kpemuIsLinuxs) {
                    return of(Category.LINUX_FLAKY, "Linux's second run of the set differs from its first here (first "
                            + s.linux() + ", second " + s.kpemu() + ")", d);
                }
            }
        }
        String left = ev.leftOut().getOrDefault(d.definition(), ev.leftOut().get(d.function()));
        if (left != null) return of(Category.LEFT_OUT, "left out of the corpus: " + left, d);
        if (d.field().startsWith("argument") && !d.field().endsWith(" name") && !d.field().equals("argument count")
                && addressLike(d.linux()) && addressLike(d.kpemu())) {
            return of(Category.MACHINE, "both values are addresses of per-boot allocations (" + d.linux() + ", " + d.kpemu() + ")", d);
        }
        long outside = ev.surveyOutside().getOrDefault(d.function(), 0L);
        if (outside > 0) {
            return of(Category.MACHINE, "the survey saw " + outside + " of " + ev.surveyCalls().getOrDefault(d.function(), 0L)
                    + " calls of " + d.function() + " outside the workload's task context (interrupts, timers, kernel threads)", d);
        }
        if (d.field().startsWith("argument") && PID_NAME.matcher(d.linux()).matches() && PID_NAME.matcher(d.kpemu()).matches()) {
            return of(Category.MACHINE, "a /proc/PID name (" + d.linux() + ", " + d.kpemu() + "): the workload's pids follow the kernel "
                    + "threads each machine started before it (CorpusGenerator's class comment: arm64's differ by one or more)", d);
        }
        if (d.field().equals("latency") && d.linux().length() == 5 && d.kpemu().length() == 5
                && d.linux().charAt(2) == 'Z' && d.kpemu().charAt(2) != 'Z') {
            return of(Category.MACHINE, "Linux fired this probe through its breakpoint (int3: NMI and hardirq, 'Z'), kpemu through the "
                    + "jump it optimized: Linux's optimizer replaces the breakpoint OPTIMIZE_DELAY after registration on the guest's clock, "
                    + "and a small set leaves its workload's first events before that", d);
        }
        if (d.field().startsWith("argument") && RETURN_TRAMPOLINE.matcher(d.linux()).find() && !RETURN_TRAMPOLINE.matcher(d.kpemu()).find()) {
            return of(Category.MACHINE, "a return probe out of instances: Linux printed the trampoline, kpemu the caller "
                    + "(instances of exited tasks come back one RCU grace period later, on each machine's clock)", d);
        }
        return of(Category.KPEMU_DEFECT, "no evidence that the machine or Linux explains it", d);
    }

    private static boolean addressLike(String v) {
        for (String part : v.replaceAll("[{}]", "").split(",")) if (!PER_BOOT_ADDRESS.matcher(part.strip()).matches()) return false;
        return !v.isEmpty();
    }

    private static Classified of(Category c, String reason, FuzzDifference d) {
        String field = d.field().startsWith("argument") && !d.field().equals("argument count") ? "argument" : d.field();
        return new Classified(c, reason, c.name().toLowerCase().replace('_', '-') + " | " + d.kind() + " | " + field + " | " + d.function(), d);
    }
}
