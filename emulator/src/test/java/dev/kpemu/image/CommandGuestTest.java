package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

class CommandGuestTest {
    @Test
    void exitStatusIsReadFromTheKernelLogLine() {
        assertEquals(7, CommandGuest.exitStatus("[    1.473000] KPEMU-EXIT-STATUS=7"));
        assertEquals(130, CommandGuest.exitStatus("[   12.000001] KPEMU-EXIT-STATUS=130"));
        assertNull(CommandGuest.exitStatus(null));
        assertNull(CommandGuest.exitStatus("[    1.0] KPEMU-EXIT-STATUS="), "no number: no status");
    }

    @Test
    void argumentsAreQuotedAsOneShellWordEach() {
        assertEquals("'a b'", CommandGuest.quote("a b"));
        assertEquals("'it'\\''s'", CommandGuest.quote("it's"));
        assertEquals("'$HOME'", CommandGuest.quote("$HOME"), "no expansion: the guest gets the argument as given");
        String init = CommandGuest.initScript(Arch.X86_64, List.of("sh", "-c", "echo out; exit 7"), false);
        assertTrue(init.contains("'sh' '-c' 'echo out; exit 7' </dev/null >&3 2>&3 3>&-"), init);
    }

    @Test
    void theCommandRunsOnTheArchsTerminalUart() {
        assertTrue(CommandGuest.initScript(Arch.X86_64, List.of("true"), false).contains("exec 3<>/dev/ttyS1"));
        assertTrue(CommandGuest.initScript(Arch.ARM64, List.of("true"), false).contains("exec 3<>/dev/ttyAMA1"));
        String session = CommandGuest.initScript(Arch.ARM64, List.of(), true);
        assertTrue(session.contains("setsid -c sh </dev/ttyAMA1 >/dev/ttyAMA1 2>&1"), session);
        assertTrue(session.contains("echo \"<0>" + CommandGuest.EXIT_MARKER + "$rc\" > /dev/kmsg"), session);
        assertThrows(IllegalArgumentException.class, () -> CommandGuest.initScript(Arch.ARM64, List.of(), false));
    }

    @Test
    void aCommandLineWithoutAConsoleGetsTheArchsFirstUart() {
        assertEquals("nokaslr quiet console=ttyS0", CommandGuest.commandLine(Arch.X86_64, "nokaslr quiet"));
        assertEquals("nokaslr console=ttyAMA0", CommandGuest.commandLine(Arch.ARM64, "nokaslr"));
        assertEquals("console=ttyS0,115200 nokaslr", CommandGuest.commandLine(Arch.X86_64, "console=ttyS0,115200 nokaslr"));
        assertEquals("nokaslr console=hvc0", CommandGuest.commandLine(Arch.X86_64, "nokaslr console=hvc0"), "the user's console is kept");
        assertNull(CommandGuest.commandLine(Arch.ARM64, null), "no --append: the arch's default, which has the console");
    }
}
