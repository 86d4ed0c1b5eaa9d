package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class TerminalEscapeTest {
    static List<TerminalEscape.Action> keys(String typed) {
        TerminalEscape e = new TerminalEscape();
        List<TerminalEscape.Action> out = new ArrayList<>();
        for (char c : typed.toCharArray()) out.add(e.key(c));
        return out;
    }

    @Test
    void ctrlAThenXStopsAndEverythingElseGoesToTheGuest() {
        var S = TerminalEscape.Action.SEND;
        var N = TerminalEscape.Action.NONE;
        assertEquals(List.of(S, S, S), keys("a\003\r"), "Ctrl-C is the guest's");
        assertEquals(List.of(S, N, TerminalEscape.Action.STOP), keys("l\001x"));
        assertEquals(List.of(N, S), keys("\001\001"), "Ctrl-A Ctrl-A: one Ctrl-A for the guest");
        assertEquals(List.of(N, N, S), keys("\001qz"), "another key after Ctrl-A is dropped with it");
        assertEquals(List.of(N, TerminalEscape.Action.HELP, S), keys("\001hx"), "after the help, x is a plain key");
    }
}
