package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.*;

/** The memory, register and current-task rules of {@link MachineFetchContext}. */
class MachineFetchContextTest {
    private static MachineFetchContext ctx(GuestKernel k) {
        return new MachineFetchContext(k.machine, k.kprobes.regs(), k.symbols, k.layout);
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kernelAndUserHalves(Arch a) {
        try (GuestKernel k = new GuestKernel(a)) {
            MachineFetchContext c = ctx(k);
            k.writeLong(k.data, 0x1122334455667788L);
            k.writeUserString(GuestKernel.USER, "user!");
            byte[] b = new byte[8];
            assertTrue(c.readKernel(k.data, b, 0, 8));
            assertEquals(0x88, b[0] & 0xff);
            assertFalse(c.readUser(k.data, b, 0, 8), "a kernel address is no user address");
            assertTrue(c.readUser(GuestKernel.USER, b, 0, 5));
            assertEquals("user!", new String(b, 0, 5, StandardCharsets.US_ASCII));
            assertFalse(c.readKernel(GuestKernel.USER, b, 0, 5), "a user address is no kernel address");
            assertFalse(c.readUser(GuestKernel.USER_UNMAPPED, b, 0, 1));
            assertEquals(a == Arch.X86_64, c.readUser(GuestKernel.USER_NOEL0, b, 0, 1), "EL0 access only matters on arm64");

            long max = a == Arch.X86_64 ? MachineFetchContext.X86_TASK_SIZE_MAX : MachineFetchContext.ARM64_TASK_SIZE_MAX;
            assertTrue(c.userRange(max - 1, 1));
            assertFalse(c.userRange(max - 1, 2));
            assertFalse(c.userRange(-8, 4));
            assertTrue(c.kernelAddress(a == Arch.X86_64 ? 0xffff_8000_0000_0000L : 0xffff_0000_0000_0000L));
            assertFalse(c.kernelAddress(a == Arch.X86_64 ? 0x0000_7fff_ffff_f000L : 0x0000_ffff_ffff_f000L));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aFailedReadLeavesTheDestinationUntouched(Arch a) {
        try (GuestKernel k = new GuestKernel(a)) {
            MachineFetchContext c = ctx(k);
            // the last mapped bytes of the kernel mapping, then nothing (x86: 16 MiB, arm64: 32 MiB)
            long end = a == Arch.X86_64 ? 0xffff_ffff_8100_0000L : 0xffff_0000_0200_0000L;
            byte[] b = new byte[16];
            Arrays.fill(b, (byte) 0x5a);
            assertTrue(c.readKernel(end - 8, b, 0, 8));
            Arrays.fill(b, (byte) 0x5a);
            assertFalse(c.readKernel(end - 8, b, 0, 16));
            for (byte x : b) assertEquals(0x5a, x);
            assertFalse(c.readKernel(-8, b, 0, 16), "wraps around");

            // strings: a missing NUL before the unmapped page is a fault
            byte[] s = new byte[64];
            k.machine.writeVirtual(end - 4, new byte[] {'a', 'b', 'c', 'd'});
            assertEquals(-1, c.readKernelString(end - 4, s, 0, 64));
            assertEquals(0, s[0]);
            // truncation keeps max - 1 bytes and a NUL
            assertEquals(4, c.readKernelString(end - 4, s, 0, 4));
            assertEquals("abc", new String(s, 0, 3, StandardCharsets.US_ASCII));
            assertEquals(0, s[3]);
            k.writeString(k.data, "xyz");
            assertEquals(4, c.readKernelString(k.data, s, 10, 64));
            assertEquals("xyz", new String(s, 10, 3, StandardCharsets.US_ASCII));
            assertEquals(-1, c.readUserString(k.data, s, 0, 64));
            assertEquals(-1, c.readKernelString(GuestKernel.USER, s, 0, 64));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void currentTaskAndRegisters(Arch a) {
        try (GuestKernel k = new GuestKernel(a)) {
            MachineFetchContext c = ctx(k);
            c.begin();
            assertEquals(k.task, c.currentTask());
            assertEquals(GuestKernel.PID, c.pid());
            assertEquals(GuestKernel.TGID, c.tgid());
            assertEquals(GuestKernel.COMM, new String(c.comm(), StandardCharsets.US_ASCII));
            // another task after the next hit begins
            long other = k.data + 0x800;
            k.writeString(other + GuestKernel.COMM_OFF, "swapper/0");
            k.writeInt(other + GuestKernel.PID_OFF, 0);
            if (a == Arch.X86_64) k.writeLong(k.machine.engine().regRead(X86Reg.GS_BASE) + GuestKernel.GS_OFF, other);
            else k.machine.engine().regWrite(Arm64Reg.SP_EL0, other);
            assertEquals(k.task, c.currentTask(), "cached for the hit");
            c.begin();
            assertEquals(other, c.currentTask());
            assertEquals("swapper/0", new String(c.comm(), StandardCharsets.US_ASCII));
            assertEquals(0, c.pid());

            RegisterSet rs = RegisterSet.of(a);
            if (a == Arch.X86_64) {
                k.machine.engine().regWrite(X86Reg.RDI, 0xd1);
                k.machine.engine().regWrite(X86Reg.R15, 0xf15);
                c.begin();   // a hit reads the registers as they are when it begins (the guest is stopped)
                assertEquals(0xd1, c.register(rs.lookup("di").slot()));
                assertEquals(0xf15, c.register(rs.lookup("r15").slot()));
                assertEquals(-1, c.register(rs.lookup("orig_ax").slot()));
            } else {
                k.machine.engine().regWrite(Arm64Reg.X0 + 5, 0x55);
                k.machine.engine().regWrite(Arm64Reg.X30, 0x1e);
                c.begin();
                assertEquals(0x55, c.register(rs.lookup("x5").slot()));
                assertEquals(0x1e, c.register(rs.lookup("lr").slot()));
            }
            assertEquals(k.machine.sp(), c.stackPointer());

            if (a == Arch.X86_64) {
                // a uniprocessor kernel: current is a plain global (no GS), e.g. pcpu_hot.current_task in .data
                long global = k.data + 0x900;
                k.writeLong(global, k.task);
                MachineFetchContext up = new MachineFetchContext(k.machine, k.kprobes.regs(), k.symbols,
                        new TaskLayout(Arch.X86_64, global, GuestKernel.COMM_OFF, GuestKernel.PID_OFF, GuestKernel.TGID_OFF, false));
                up.begin();
                assertEquals(k.task, up.currentTask());
                assertEquals(GuestKernel.COMM, new String(up.comm(), StandardCharsets.US_ASCII));
            }

            // no layout: no task
            MachineFetchContext none = new MachineFetchContext(k.machine, k.kprobes.regs(), k.symbols, null);
            assertEquals(0, none.currentTask());
            assertEquals(0, none.comm().length);
            assertEquals(0, none.pid());
        }
    }
}
