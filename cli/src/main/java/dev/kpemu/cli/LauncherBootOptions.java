package dev.kpemu.cli;

import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Map;

/**
 * The JVM options a benchmark's kpemu children run with: the ones the launcher gives
 * {@code kpemu boot}, so a benchmark measures kpemu as its users run it. The launcher runs
 * {@code bench} itself with other options (the steady-state rows of {@code bench boot} run in this
 * JVM) and hands the boot's options over in {@value #VARIABLE}, one per line (a path with spaces
 * stays one option). Without it (kpemu started by something other than the launcher, e.g. a test
 * under Maven) the children take this JVM's own options.
 */
final class LauncherBootOptions {
    /** The environment variable the launcher ({@code ./kpemu}) sets for {@code bench}. */
    static final String VARIABLE = "KPEMU_BOOT_JAVA_OPTS";

    private LauncherBootOptions() {}

    /** The options for a kpemu child of this process. */
    static List<String> forChildren() {
        return forChildren(System.getenv(), ManagementFactory.getRuntimeMXBean().getInputArguments());
    }

    /** The launcher's boot options in {@code environment}, else {@code ownOptions}. */
    static List<String> forChildren(Map<String, String> environment, List<String> ownOptions) {
        String exported = environment.get(VARIABLE);
        if (exported == null || exported.isBlank()) return List.copyOf(ownOptions);
        return exported.lines().filter(l -> !l.isEmpty()).toList();
    }
}
