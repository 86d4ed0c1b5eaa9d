package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu bench uprobes}' applet table ({@link UprobeBench#appletMains}) finds what
 * guest-images/busybox-offsets.sh found when the uprobe reference was recorded: true_main's file
 * offset in the header of {@code reference/ARCH/6.1/uprobes.trace}, for the same busybox package.
 */
class UprobeBenchAppletsTest {
    private static final Pattern HEADER = Pattern.compile("^# busybox: (\\S+) .*@TRUE@ = (0x[0-9a-f]+) \\(true_main\\)");

    @ParameterizedTest
    @EnumSource(Arch.class)
    void trueMainIsWhereTheRecordingsScriptFoundIt(Arch arch) throws Exception {
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference").resolve(arch.linuxName()).resolve("6.1").resolve("uprobes.trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no uprobe recording in this checkout");
        Matcher m = Files.readAllLines(ref).stream().map(HEADER::matcher).filter(Matcher::find).findFirst().orElseThrow();
        Path busybox = GuestImages.forRepository().busybox(arch);
        String version = Files.readString(busybox.resolveSibling("busybox.version"));
        Assumptions.assumeTrue(version.contains("version=" + m.group(1) + "\n"), "the recording's busybox is " + m.group(1));
        Map<String, Long> mains = UprobeBench.appletMains(Files.readAllBytes(busybox));
        assertEquals(Long.decode(m.group(2)), mains.get("true"));
        assertTrue(mains.size() > 200 && mains.containsKey("sh") && mains.containsKey("test"), mains.keySet().toString());
    }
}
