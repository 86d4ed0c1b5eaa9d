package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Which instruction words {@link Arm64DebugRegisterWrites} takes for a write of a watchpoint register
 * against GNU as's encodings (binutils' aarch64 assembler and objdump, Debian's
 * {@code binutils-aarch64-linux-gnu}, as the project's arm64 static compiler brings): every
 * {@code msr} of DBGWVR0–15_EL1 and DBGWCR0–15_EL1, from any register, is taken; MDSCR_EL1,
 * the breakpoint registers, other debug registers of the same op0/op1/CRn, SP_EL0 and an
 * {@code mrs} are not.
 */
class Arm64DebugRegisterWritesTest {
    @TempDir Path tmp;

    @Test
    void theWatchRegisterAndMdscrWritesGnuAsEncodesAreTakenAndNoOthers() throws Exception {
        Map<String, Boolean> wanted = new LinkedHashMap<>();
        for (int n = 0; n < 16; n++) {
            wanted.put("msr dbgwvr" + n + "_el1, x" + (n % 31), true);
            wanted.put("msr dbgwcr" + n + "_el1, x" + ((n + 7) % 31), true);
            wanted.put("msr dbgbvr" + n + "_el1, x0", false);
            wanted.put("msr dbgbcr" + n + "_el1, x0", false);
        }
        wanted.put("msr mdscr_el1, x1", false);      // read at a hit, not followed
        wanted.put("msr dbgwvr3_el1, xzr", true);
        wanted.put("msr sp_el0, x0", false);
        wanted.put("mrs x0, dbgwvr0_el1", false);
        wanted.put("mrs x0, mdscr_el1", false);
        wanted.put("msr oslar_el1, x0", false);
        wanted.put("msr mdccint_el1, x0", false);
        wanted.put("msr osdlr_el1, x0", false);

        Path src = tmp.resolve("a.s"), obj = tmp.resolve("a.o");
        Files.writeString(src, String.join("\n", wanted.keySet()) + "\n");
        String dump;
        try {
            run("aarch64-linux-gnu-as", src.toString(), "-o", obj.toString());
            dump = run("aarch64-linux-gnu-objdump", "-d", obj.toString());
        } catch (java.io.IOException e) {
            Assumptions.abort("no aarch64 binutils on this host (guest-images/static-cc.sh arm64 installs them)");
            return;
        }
        Pattern line = Pattern.compile("(?m)^\\s*[0-9a-f]+:\\s+([0-9a-f]{8})\\s+(m[rs][rs]\\s+.*)$");
        Matcher m = line.matcher(dump);
        List<String> expected = new ArrayList<>(), found = new ArrayList<>();
        List<Boolean> want = new ArrayList<>(wanted.values());
        int i = 0;
        while (m.find()) {
            int insn = (int) Long.parseLong(m.group(1), 16);
            expected.add(m.group(2) + " " + want.get(i++));
            found.add(m.group(2) + " " + Arm64DebugRegisterWrites.writesWatchRegister(insn));
        }
        assertEquals(wanted.size(), found.size(), dump);
        assertEquals(expected, found);
    }

    private static String run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), String.join(" ", cmd) + ": " + out);
        return out;
    }
}
