package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;
import java.util.function.Supplier;

import dev.kpemu.unicorn.Unicorn;

/**
 * What the native probe recorder relies on in an arch's {@link ContextRegisters}: each register
 * found once, inside the prefix the recorder's context saves ({@code end} bytes), holding what the
 * register API reads on another engine with other values; a register the engine computes when it
 * is read ({@code computed}) is not among them.
 */
public final class ContextRegistersCheck {
    private ContextRegistersCheck() {}

    public static void check(ContextRegisters regs, long end, Supplier<Unicorn> engine, int computed) {
        int[] ids = regs.ids();
        Set<Long> seen = new HashSet<>();
        for (int id : ids) {
            long off = regs.offsetOf(id);
            assertTrue(off >= 0 && off + 8 <= end, "register " + id + " at " + off + ", the prefix ends at " + end);
            assertTrue(seen.add(off), "one place per register: " + off);
        }
        assertEquals(-1, regs.offsetOf(computed), "a register computed when read goes through the engine");
        try (Unicorn uc = engine.get(); Unicorn.Context ctx = uc.contextAllocPrefix(end)) {
            for (int i = 0; i < ids.length; i++) uc.regWrite(ids[i], 0xffff_8000_0123_4000L + 0x1000L * i + 8L * i);
            uc.contextSave(ctx);
            for (int id : ids) assertEquals(uc.regRead(id), ctx.blob().get(ValueLayout.JAVA_LONG_UNALIGNED, regs.offsetOf(id)), "register " + id);
        }
    }
}
