package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Schedule;
import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Events from several vCPUs (issue 26, docs/smp-notes.md step 6), bare metal: {@value #N} vCPUs each
 * call the probed function {@value #K} times. The trace's cpu column is the vCPU that hit
 * ({@code [000]} to {@code [002]}), {@code cpu}/{@code CPU} in a filter select by it, and a hist
 * trigger keys on it as Linux does ({@code keys=cpu} or {@code common_cpu}, printed
 * {@code common_cpu}).
 */
class SmpTraceTest {
    static final int N = 3, K = 40;
    static final Pattern CPU_COLUMN = Pattern.compile("\\[(\\d{3})\\] ");

    /** The guest with its vCPUs, all running the loop; every vCPU shares vCPU 0's current task. */
    static GuestKernel withCpus(Arch arch) { return withCpus(arch, Dialect.LINUX_6_1); }

    static GuestKernel withCpus(Arch arch, Dialect dialect) {
        GuestKernel k = new GuestKernel(arch, dialect);
        long driver = k.guest.writeLoopCalling(k.sym("kprobe_target"), K);
        k.guest.startAll(N, driver);
        int taskReg = arch == Arch.X86_64 ? X86Reg.GS_BASE : Arm64Reg.SP_EL0;
        long task = k.machine.engine(0).regRead(taskReg);
        for (int cpu = 1; cpu < N; cpu++) k.machine.engine(cpu).regWrite(taskReg, task);
        k.machine.setSchedule(Schedule.roundRobin(7));
        return k;
    }

    static void run(GuestKernel k) {
        StopReason s = k.machine.run(100_000_000L);
        assertInstanceOf(StopReason.Halted.class, s, s.toString());
    }

    /** Events per cpu column. */
    static Map<Integer, Integer> perCpu(List<String> lines) {
        Map<Integer, Integer> n = new TreeMap<>();
        for (String l : lines) {
            Matcher m = CPU_COLUMN.matcher(l);
            if (l.contains(": e: (") && m.find()) n.merge(Integer.parseInt(m.group(1)), 1, Integer::sum);
        }
        return n;
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void theCpuColumnIsTheVcpuThatHit(Arch arch) throws Exception {
        try (GuestKernel k = withCpus(arch)) {
            k.write("p:e kprobe_target v=" + k.reg(0));
            k.engine.enable("e");
            run(k);
            assertEquals(Map.of(0, K, 1, K, 2, K), perCpu(k.lines()), String.join("\n", k.lines()));
            for (TraceRecord r : k.records) assertEquals(r.context().cpu(), Integer.parseInt(lineCpu(r.line())), r.line());
            assertEquals(N * K, k.engine.hits("e"));
            assertEquals(0, k.engine.misses("e"));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void filtersSelectByCpu(Arch arch) throws Exception {
        try (GuestKernel k = withCpus(arch)) {
            k.write("p:e kprobe_target");
            k.engine.setFilter("e", "cpu == 1 || CPU > 1");
            k.engine.enable("e");
            run(k);
            assertEquals(Map.of(1, K, 2, K), perCpu(k.lines()));
        }
    }

    /** 6.12's filters take a cpulist ({@code CPUS{}}, Linux 6.6+). */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aCpulistFilterOnLinux612(Arch arch) throws Exception {
        try (GuestKernel k = withCpus(arch, Dialect.LINUX_6_12)) {
            k.write("p:e kprobe_target");
            k.engine.setFilter("e", "cpu & CPUS{0,2}");
            k.engine.enable("e");
            run(k);
            assertEquals(Map.of(0, K, 2, K), perCpu(k.lines()));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void histTriggersKeyOnTheCpu(Arch arch) throws Exception {
        try (GuestKernel k = withCpus(arch)) {
            k.write("p:e kprobe_target");
            k.engine.addTrigger("e", "hist:keys=cpu");
            k.engine.enable("e");
            run(k);
            String hist = k.engine.hist("e");
            assertTrue(hist.contains("hist:keys=common_cpu:vals=hitcount:sort=hitcount:size=2048 [active]"), hist);
            Map<Integer, Integer> counts = new TreeMap<>();
            Matcher m = Pattern.compile("\\{ common_cpu: +(\\d+) \\} hitcount: +(\\d+)").matcher(hist);
            while (m.find()) counts.put(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
            assertEquals(Map.of(0, K, 1, K, 2, K), counts, hist);
        }
    }

    /** {@code kprobe_events} lists a return probe's default maxactive as Linux fills it in: max(10, 2 x CPUs). */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aReturnProbesListedMaxactiveFollowsTheCpus(Arch arch) throws Exception {
        try (GuestKernel k = new GuestKernel(arch)) {
            k.guest.startAll(6, k.guest.writeLoopCalling(k.sym("kprobe_target"), 1));
            k.write("r:rr kprobe_target");
            k.write("r3:r3 kprobe_target");
            assertEquals("r12:kprobes/rr kprobe_target\nr3:kprobes/r3 kprobe_target\n", k.engine.listing());
        }
    }

    static String lineCpu(String line) {
        Matcher m = CPU_COLUMN.matcher(line);
        assertTrue(m.find(), line);
        return m.group(1);
    }
}
