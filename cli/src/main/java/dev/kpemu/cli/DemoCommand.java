package dev.kpemu.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.unicorn.X86Reg;

/**
 * {@code kpemu demo}: the first thing a newcomer runs. Until a kernel boots, it runs a bare-metal
 * guest with paging on and reports what the guest and the host did.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run the demo guest and print what happened.")
final class DemoCommand implements Callable<Integer> {
    static final long CODE = 0x100000, RESULTS = 0x200000, PT = 0x10000;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        byte[] program = resource("demo-x86.bin");
        try (X86Machine m = X86Machine.create(12 << 20)) {
            var mem = m.memory();
            X86LongMode.identityMap(mem, 0x1000, 16 << 20);
            mem.writeLong(0x3000 + 8 * 4, PT | 3);
            mem.writeLong(0x3000 + 8 * 5, (PT + 0x1000) | 3);
            X86LongMode.enter(m.engine(), 0x5000, X86LongMode.writeGdt(mem, 0x5000), 0x1000);
            m.engine().regWrite(X86Reg.RSP, 0x80000);
            mem.write(CODE, program);
            m.setPc(CODE);
            long[] offered = {0};
            m.setTrapHandler((machine, address, imm) -> {
                offered[0]++;
                out.printf("host: int3 at 0x%x is not a host probe; delivering it to the guest's IDT%n", address);
                return false;
            });
            out.printf("x86_64: bare-metal guest, %d bytes at 0x%x, 4-level paging, 1000 pages left unmapped%n", program.length, CODE);
            long t0 = System.nanoTime();
            StopReason r = m.run(100_000_000);
            long wall = System.nanoTime() - t0;
            out.printf("stopped: %s at rip 0x%x%n", r, m.pc());
            out.printf("guest:  sum(1..100) = %d, page faults handled by the guest = %d (last error code 0x%x), int3 handled = %d%n",
                    mem.readLong(RESULTS), mem.readLong(RESULTS + 8), mem.readLong(RESULTS + 24), mem.readLong(RESULTS + 16));
            out.printf("host:   exceptions delivered = %d, traps offered to the host first = %d%n", m.exceptionsDelivered(), offered[0]);
            out.printf("clock:  %d instructions charged, %.3f ms guest time, %.1f ms wall%n",
                    m.clock().instructions(), m.clock().nanos() / 1e6, wall / 1e6);
            out.flush();
            boolean ok = r instanceof StopReason.Halted && mem.readLong(RESULTS) == 5050 && mem.readLong(RESULTS + 8) == 1000;
            return ok ? ExitCodes.OK : ExitCodes.GUEST_PANIC;
        }
    }

    static byte[] resource(String name) throws IOException {
        try (InputStream in = DemoCommand.class.getResourceAsStream(name)) {
            if (in == null) throw new IOException("demo program " + name + " missing from the build");
            return in.readAllBytes();
        }
    }
}
