package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.devices.Pl011;
import dev.kpemu.machine.board.Arm64Board;
import dev.kpemu.machine.board.X86Pc;
import dev.kpemu.machine.x86.devices.Uart16550;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * A board's machine plus an engine opened by {@link Machine#openSecondaryEngine} (docs/smp-notes.md,
 * step 1), both arches, bare metal with paging off (virtual = physical): the two engines share RAM
 * (regions added before and after the engine joined), reach the same devices (the board's UART by
 * MMIO on arm64 and port I/O on x86, a test device by MMIO on both) and drop translated code
 * together ({@link Machine#invalidateCode}, {@link Machine#flushTranslations}); the machine closes
 * the engine. The machine's own engine runs through {@link Machine#run} to an idle instruction, the
 * secondary one through {@link Unicorn#start} up to the end of its program.
 */
class SecondaryEngineTest {

    /** One arch: its board, where its programs live, and the few instructions they use. */
    enum Board {
        X86 {
            @Override Machine create(Console console) {
                pc = new X86Pc(16L << 20, console.stream(), false);
                return pc.machine();
            }
            @Override long ram() { return 0x10_0000; }
            @Override long spare() { return 0x4000_0000L; }
            @Override byte[] asm(String src, long at) { return Asm.x86(src, at); }
            @Override String idle() { return "hlt"; }
            @Override int result() { return X86Reg.RAX; }
            @Override int sp() { return X86Reg.RSP; }
            @Override String load(long address) { return "movabs $" + address + ", %rbx\n mov (%rbx), %rax\n"; }
            @Override String store(long address, long value) {
                return "movabs $" + value + ", %rax\n movabs $" + address + ", %rbx\n mov %rax, (%rbx)\n";
            }
            @Override String load32(long address) { return "movabs $" + address + ", %rbx\n mov (%rbx), %eax\n"; }
            @Override String store32(long address, int value) {
                return "mov $" + value + ", %eax\n movabs $" + address + ", %rbx\n mov %eax, (%rbx)\n";
            }
            @Override String call(long address) { return "movabs $" + address + ", %rbx\n call *%rbx\n"; }
            @Override String function(int value) { return "mov $" + value + ", %eax\n ret\n nop\n nop"; }
        },
        ARM64 {
            @Override Machine create(Console console) {
                board = Arm64Board.create(16L << 20, console::put);
                return board.machine();
            }
            @Override long ram() { return Arm64Layout.RAM_BASE; }
            @Override long spare() { return 0x3000_0000L; }
            @Override byte[] asm(String src, long at) { return Asm.arm64(src, at); }
            @Override String idle() { return "wfi"; }
            @Override int result() { return Arm64Reg.X0; }
            @Override int sp() { return Arm64Reg.SP; }
            @Override String load(long address) { return imm("x1", address) + "ldr x0, [x1]\n"; }
            @Override String store(long address, long value) { return imm("x0", value) + imm("x1", address) + "str x0, [x1]\n"; }
            @Override String load32(long address) { return imm("x1", address) + "ldr w0, [x1]\n"; }
            @Override String store32(long address, int value) { return imm("x0", value & 0xffff_ffffL) + imm("x1", address) + "str w0, [x1]\n"; }
            @Override String call(long address) { return imm("x1", address) + "blr x1\n"; }
            @Override String function(int value) { return "mov x0, #" + value + "\n ret"; }

            private static String imm(String reg, long v) {
                StringBuilder b = new StringBuilder("movz " + reg + ", #" + (v & 0xffff) + "\n");
                for (int s = 16; s < 64; s += 16) {
                    long part = (v >>> s) & 0xffff;
                    if (part != 0) b.append("movk ").append(reg).append(", #").append(part).append(", lsl #").append(s).append('\n');
                }
                return b.toString();
            }
        };

        X86Pc pc;
        Arm64Board board;

        abstract Machine create(Console console);
        /** Where the programs go, in the board's RAM. */
        abstract long ram();
        /** A free guest-physical range for regions added later. */
        abstract long spare();
        abstract byte[] asm(String src, long at);
        abstract String idle();
        abstract int result();
        abstract int sp();
        /** 8 bytes at {@code address} into the result register. */
        abstract String load(long address);
        abstract String store(long address, long value);
        abstract String load32(long address);
        abstract String store32(long address, int value);
        abstract String call(long address);
        /** A function returning {@code value} in the result register, 8 bytes. */
        abstract String function(int value);
    }

    /** The console's bytes, from either UART. */
    static final class Console {
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        java.io.OutputStream stream() { return bytes; }
        void put(int b) { bytes.write(b); }
        String text() { return bytes.toString(java.nio.charset.StandardCharsets.ISO_8859_1); }
    }

    /** A board, a secondary engine, and each program in a page of its own (so no program is ever rewritten). */
    static final class Rig implements AutoCloseable {
        final Board b;
        final Console console = new Console();
        final Machine m;
        final Unicorn second;
        private long nextPage;

        Rig(Board b) {
            this.b = b;
            this.m = b.create(console);
            this.second = m.openSecondaryEngine();
            init();
        }

        /** A rig on a machine already made, with its secondary engine. */
        Rig(Board b, Machine m, Unicorn second) {
            this.b = b;
            this.m = m;
            this.second = second;
            init();
        }

        private void init() {
            this.nextPage = b.ram() + 0x10_0000;
            second.regWrite(b.sp(), b.ram() + 0x8000);
            m.engine().regWrite(b.sp(), b.ram() + 0x9000);
        }

        long data() { return b.ram() + 0x1_0000; }

        long func() { return b.ram() + 0x2_0000; }

        /** Runs {@code body} on the machine's engine (run loop, to the idle instruction after it); returns the result register. */
        long onMachine(String body) {
            long at = nextPage;
            nextPage += 0x1000;
            m.memory().write(at, b.asm(body + b.idle() + "\n", at));
            m.setPc(at);
            assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
            return m.engine().regRead(b.result());
        }

        /** Runs {@code body} on the secondary engine, up to its end; returns the result register. */
        long onSecondary(String body) {
            long at = nextPage;
            nextPage += 0x1000;
            byte[] code = b.asm(body + b.idle() + "\n", at);
            m.memory().write(at, code);
            second.start(at, at + code.length - (b == Board.X86 ? 1 : 4), 0, 0);   // up to the idle instruction
            return second.regRead(b.result());
        }

        @Override public void close() { m.close(); }
    }

    /** A test device: reads return 0xd0000000 + offset, every access is recorded. */
    static final class Recorder implements Device.Mmio {
        final List<String> log = new ArrayList<>();
        @Override public String name() { return "recorder"; }
        @Override public long mmioSize() { return 0x1000; }
        @Override public long read(long offset, int size) {
            log.add("R " + Long.toHexString(offset));
            return 0xd000_0000L + offset;
        }
        @Override public void write(long offset, int size, long value) { log.add("W " + Long.toHexString(offset) + "=" + Long.toHexString(value)); }
    }

    @ParameterizedTest
    @EnumSource(Board.class)
    void guestStoresOnEitherEngineAreLoadedByTheOther(Board b) {
        try (Rig r = new Rig(b)) {
            long a = r.data(), v = 0x1122_3344_5566_7788L, w = 0x0102_0304_0506_0708L;
            r.onMachine(b.store(a, v));
            assertEquals(v, r.onSecondary(b.load(a)), "the secondary engine loads the machine's store");
            r.onSecondary(b.store(a + 8, w));
            assertEquals(w, r.onMachine(b.load(a + 8)), "the machine loads the secondary engine's store");
            assertEquals(w, r.m.memory().readLong(a + 8), "and the host");
            assertEquals(List.of(r.second), r.m.secondaryEngines());
        }
    }

    @ParameterizedTest
    @EnumSource(Board.class)
    void secondaryEngineReachesTheBoardsDevices(Board b) {
        try (Rig r = new Rig(b)) {
            if (b == Board.ARM64) {
                Pl011 uart = b.board.uart();
                long base = Arm64Layout.UART_BASE;
                r.onSecondary(b.store32(base + Pl011.UARTDR, 'Z'));
                assertEquals("Z", r.console.text(), "a store to the PL011's data register reaches the console");
                r.onSecondary(b.store32(base + Pl011.UARTIBRD, 0x1234));
                assertEquals(0x1234, uart.read(Pl011.UARTIBRD, 4), "the device holds what the secondary engine stored");
                uart.write(Pl011.UARTIBRD, 4, 0x4321);
                assertEquals(0x4321, r.onSecondary(b.load32(base + Pl011.UARTIBRD)), "the secondary engine loads the device's register");
                assertEquals(0x4321, r.onMachine(b.load32(base + Pl011.UARTIBRD)), "as the machine's engine does");
            } else {
                Uart16550 uart = b.pc.uart();
                int scr = Uart16550.COM1_BASE + Uart16550.SCR, thr = Uart16550.COM1_BASE + Uart16550.RBR_THR;
                r.onSecondary("mov $" + (int) 'Z' + ", %al\n mov $" + thr + ", %dx\n out %al, %dx\n");
                assertEquals("Z", r.console.text(), "an out to COM1's transmit register reaches the console");
                r.onSecondary("mov $0x5a, %al\n mov $" + scr + ", %dx\n out %al, %dx\n");
                assertEquals(0x5a, uart.in(scr, 1), "the device holds what the secondary engine wrote");
                uart.out(scr, 1, 0xa5);
                String in = "xor %eax, %eax\n mov $" + scr + ", %dx\n in %dx, %al\n";
                assertEquals(0xa5, r.onSecondary(in), "the secondary engine reads the device's register");
                assertEquals(0xa5, r.onMachine(in), "as the machine's engine does");
            }
        }
    }

    /** Windows and regions already there when the engine joined are mapped in it; so are those added after. */
    @ParameterizedTest
    @EnumSource(Board.class)
    void regionsAddedBeforeAndAfterTheEngineJoinedAreMappedInIt(Board b) {
        try (Machine m = b.create(new Console())) {
            Recorder early = m.bus().attach(b.spare(), new Recorder());
            Unicorn second = m.openSecondaryEngine();
            Recorder late = m.bus().attach(b.spare() + 0x1000, new Recorder());
            MemoryRegion ram = m.memory().addRam("late", b.spare() + 0x10_0000, 0x10_0000);
            Rig r = new Rig(b, m, second);
            long v = 0x0abc_def0_1234_5678L;
            r.onSecondary(b.store(ram.base() + 0x800, v));
            assertEquals(v, m.memory().readLong(ram.base() + 0x800), "the secondary engine stored into RAM added after it joined");
            assertEquals(v, r.onMachine(b.load(ram.base() + 0x800)), "which the machine's engine maps too");
            assertEquals(0xd000_0010L, r.onSecondary(b.load32(b.spare() + 0x10)) & 0xffff_ffffL);
            assertEquals(List.of("R 10"), early.log, "a window attached before the engine joined");
            assertEquals(0xd000_0020L, r.onSecondary(b.load32(b.spare() + 0x1000 + 0x20)) & 0xffff_ffffL);
            r.onSecondary(b.store32(b.spare() + 0x1000 + 0x24, 0x77));
            assertEquals(List.of("R 20", "W 24=77"), late.log, "a window attached after the engine joined");
        }
    }

    /**
     * The host rewrites a function both engines have run: neither notices (docs/smp-notes.md, fact
     * c) until {@link Machine#invalidateCode}, which drops it in both; {@link Machine#flushTranslations}
     * likewise.
     */
    @ParameterizedTest
    @EnumSource(Board.class)
    void invalidateCodeMakesEveryEngineRunTheNewCode(Board b) {
        try (Rig r = new Rig(b)) {
            long f = r.func();
            byte[] one = b.asm(b.function(1), f), two = b.asm(b.function(2), f), three = b.asm(b.function(3), f);
            assertEquals(8, one.length);
            r.m.memory().write(f, one);
            String caller = b.call(f);
            assertEquals(1, r.onMachine(caller));
            assertEquals(1, r.onSecondary(caller));

            r.m.memory().write(f, two);
            assertEquals(1, r.onMachine(caller), "a host write drops no translation (fact c)");
            assertEquals(1, r.onSecondary(caller), "in neither engine");
            r.m.invalidateCode(f, two.length);
            assertEquals(2, r.onMachine(caller), "the machine's engine runs the new code");
            assertEquals(2, r.onSecondary(caller), "and so does the secondary engine");

            r.m.memory().write(f, three);
            r.m.flushTranslations();
            assertEquals(3, r.onMachine(caller));
            assertEquals(3, r.onSecondary(caller), "flushTranslations empties the secondary engine's cache too");
        }
    }

    @ParameterizedTest
    @EnumSource(Board.class)
    void closingTheMachineClosesItsSecondaryEngines(Board b) {
        Machine m = b.create(new Console());
        Unicorn first = m.openSecondaryEngine(), second = m.openSecondaryEngine();
        assertEquals(List.of(first, second), m.secondaryEngines());
        m.close();
        assertThrows(IllegalStateException.class, first::contextAlloc, "closed with the machine");
        assertThrows(IllegalStateException.class, second::contextAlloc, "closed with the machine");
        assertThrows(IllegalStateException.class, m::openSecondaryEngine);
    }
}
