package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.machine.Arch;

/**
 * Sessions on Debian's default kernel. Expected values from the kernel's semantics, by hand: two
 * probes on one address see the same hits (Linux aggregates them: every handler of the address
 * runs at each hit); {@code kprobe_events}' event line names the event ({@code myopen:}) after the
 * task's context; a symbol that does not exist is -ENOENT for {@code register_kprobe}
 * (kernel/kprobes.c: {@code kprobe_addr}); on arm64 a system call from user mode comes through
 * {@code el0t_64_sync} → {@code el0t_64_sync_handler} → {@code el0_svc} → {@code do_el0_svc} →
 * {@code el0_svc_common} → {@code invoke_syscall}, which calls the table's entry
 * (arch/arm64/kernel/entry.S, entry-common.c, syscall.c); at a function's entry its caller's
 * return address is still in {@code lr}, not in a frame record, so the walk from the frame
 * pointer goes on from the caller's caller, as Linux's unwinder does. A definition
 * naming no function is refused before boot, as {@code kpemu boot -e} refuses it (exit 2).
 */
@Tag("kernel")
class SessionTest {

    @Test
    void eventsAndJavaProbesShareTheSessionAndTheHits() {
        List<String> lines = new ArrayList<>();
        List<String> listing = new ArrayList<>();
        KpemuSession s = KpemuSession.builder().command("cat", "/proc/version").timeout(Duration.ofSeconds(30))
                .events("p:myopen do_sys_openat2").traceSink(lines::add).build();
        List<Object> seen = new ArrayList<>();
        Kprobe javaProbe = s.register(Kprobe.on("do_sys_openat2").pre(ctx -> {
            if (!seen.isEmpty() || !ctx.comm().equals("cat")) return;
            long filename = ctx.arg("filename"), how = ctx.arg("how");
            seen.addAll(List.of(ctx.argTypes(), ctx.userString(filename), ctx.kernelString(filename),
                    ctx.readUser(filename, 5).map(String::new), ctx.readKernel(filename, 5).isPresent(),
                    ctx.readLong(how), ctx.field("how", "flags"), ctx.pid() == ctx.tgid(), ctx.registers().get("rdi") == ctx.arg(0), ctx.cpu()));
        }));
        s.onReady(ready -> listing.add(ready.kprobes().list()));
        SessionResult r = s.run();
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        r.assertNoHandlerFailures();
        // do_sys_openat2(int dfd, const char __user *filename, struct open_how *how) (fs/open.c): the name
        // is a user pointer, which the kernel's nofault rules read as user memory only; open_how's
        // first member is flags (include/uapi/linux/openat2.h); cat is one thread (pid == tgid)
        assertEquals(List.of("int", "const char *", "struct open_how *"), seen.get(0));
        assertEquals(java.util.Optional.of("/proc/version"), seen.get(1));
        assertEquals(java.util.Optional.empty(), seen.get(2), "copy_from_kernel_nofault refuses a user address");
        assertEquals(java.util.Optional.of("/proc"), seen.get(3));
        assertEquals(false, seen.get(4));
        assertEquals(((java.util.OptionalLong) seen.get(6)).getAsLong(), ((java.util.OptionalLong) seen.get(5)).getAsLong());
        assertEquals(true, seen.get(7));
        assertEquals(true, seen.get(8), "x86-64 passes the first argument in rdi");
        assertEquals(0, seen.get(9), "one CPU: smp_processor_id() is 0");
        assertTrue(lines.stream().filter(l -> l.contains(" myopen: ")).allMatch(l -> l.contains(" [000] ")), "the cpu column of one CPU");
        assertEquals(lines, r.traceLines());
        long events = lines.stream().filter(l -> l.contains(" myopen: (do_sys_openat2+0x")).count();
        assertTrue(events > 0, String.join("\n", lines));
        assertEquals(events, javaProbe.hits(), "both probes sit on one address: every hit runs both");
        assertEquals(1, listing.size());
        assertTrue(listing.get(0).lines().anyMatch(l -> l.contains(" k  do_sys_openat2+0x0")), listing.get(0));
    }

    @Test
    void aDefinitionLinuxRefusesEndsTheSessionBeforeBoot() {
        SessionResult r = KpemuSession.builder().events("p:bad kpemu_no_such_function").build().run();
        assertEquals(Outcome.REJECTED, r.outcome());
        assertEquals(0, r.guestNanos(), "nothing ran");
    }

    @Test
    void aJavaProbeTheKernelRefusesThrowsItsErrno() {
        KpemuSession s = KpemuSession.builder().command("true").timeout(Duration.ofSeconds(30)).build();
        s.register(Kprobe.on("kpemu_no_such_function"));
        KprobeException e = assertThrows(KprobeException.class, s::run);
        assertEquals(Errno.ENOENT, e.errno());
    }

    @Test
    void arm64StackTracesWalkBackToTheSystemCallEntryAndAHandlerStopsTheGuest() {
        List<String> frames = new ArrayList<>();
        KpemuSession s = KpemuSession.builder().arch(Arch.ARM64).command("cat", "/proc/version").timeout(Duration.ofSeconds(30)).build();
        s.register(Kprobe.on("do_sys_openat2").pre(ctx -> {
            if (frames.isEmpty() && ctx.comm().equals("cat")) {
                for (long a : ctx.stackTrace()) frames.add(ctx.symbolize(a));
                ctx.stopGuest("seen cat's open");
            }
        }));
        SessionResult r = s.run();
        assertEquals(Outcome.STOPPED, r.outcome(), r.status());
        assertEquals("stopped: seen cat's open", r.status());
        assertEquals(null, r.commandExit(), "stopped before cat ended");
        r.assertNoHandlerFailures();
        assertFalse(frames.isEmpty());
        assertTrue(frames.get(0).startsWith("do_sys_openat2+0x0/"), frames.toString());
        List<String> names = frames.stream().map(f -> f.substring(0, f.indexOf('+'))).toList();
        int at = names.indexOf("invoke_syscall");
        assertTrue(at > 0, frames.toString());
        assertEquals(List.of("invoke_syscall", "el0_svc_common", "do_el0_svc", "el0_svc", "el0t_64_sync_handler", "el0t_64_sync"),
                names.subList(at, names.size()).stream().map(n -> n.replaceAll("\\..*", "")).toList(), frames.toString());
    }
}
