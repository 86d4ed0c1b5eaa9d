package dev.kpemu.kprobes.events;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.machine.Arch;

/**
 * Mutated BTF-argument definitions against Debian 13's kernel and its own BTF: every input is
 * accepted (and compiles and lists) or refused with the kernel's error (a {@link ProbeSyntaxException}),
 * in the 6.12, 7 and 6.1 dialects; nothing else escapes (a user's typo must never become a stack trace).
 */
@Tag("kernel")
class BtfArgsFuzzTest {
    private static final String[] SEEDS = {"p vfs_read count pos", "p vfs_read $arg*", "r vfs_write%return $arg3 $retval",
            "p vfs_read file->f_path.dentry->d_name.name:string", "p do_sys_openat2 dfd filename:ustring how->flags",
            "r filp_open $retval->f_mode", "p vfs_read file:%pD", "p vfs_read file->f_mode:b3@2/32", "p vfs_read +0(file->f_inode):u64[4]",
            "r:x vfs_read $arg1 $arg2:ustring $retval:symstr", "p vfs_read $arg2:string[3]", "p vfs_read x=file->f_path.dentry:%pd"};
    private static final String ALPHABET = "-.>$*:%@+()[]\\\"0123456789abcdefilmnoprstuvx_ =>";

    @Test
    void mutatedDefinitionsAreAcceptedOrRefusedAsTheKernelWould() throws Exception {
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian trixie = RecordedKernels.choice("trixie");
        var k = images.vmlinux(Arch.X86_64, trixie);
        Kallsyms.KernelText kt = Kallsyms.load(k);
        KallsymsSymbols syms = KallsymsSymbols.forKernel(kt.symbols(), Arch.X86_64, kt.bytes()).withBtf(BtfLocator.read(k).btf());
        Random r = new Random(11);
        List<String> escaped = new ArrayList<>();
        int accepted = 0;
        for (Dialect d : new Dialect[] {Dialect.LINUX_6_12, Dialect.LINUX_7, Dialect.LINUX_6_1}) {
            ProbeParser p = new ProbeParser(Arch.X86_64, d, syms);
            for (int i = 0; i < 8000; i++) {
                StringBuilder s = new StringBuilder(SEEDS[r.nextInt(SEEDS.length)]);
                for (int j = 1 + r.nextInt(4); j > 0; j--) {
                    int pos = r.nextInt(s.length() + 1);
                    char c = ALPHABET.charAt(r.nextInt(ALPHABET.length()));
                    switch (r.nextInt(3)) {
                        case 0 -> s.insert(pos, c);
                        case 1 -> { if (pos < s.length()) s.deleteCharAt(pos); }
                        default -> { if (pos < s.length()) s.setCharAt(pos, c); }
                    }
                }
                try {
                    if (p.parse(s.toString()) instanceof TraceProbe tp) {
                        CompiledProbe.compile(tp, Arch.X86_64, syms);
                        TraceFormatter.listing(tp);
                        accepted++;
                    }
                } catch (ProbeSyntaxException e) {
                    // refused as the kernel refuses it
                } catch (RuntimeException e) {
                    if (escaped.size() < 10) escaped.add(d + " [" + s + "]: " + e);
                }
            }
        }
        assertTrue(escaped.isEmpty(), String.join("\n", escaped));
        assertTrue(accepted > 200, "mutations keep many definitions valid: " + accepted);
    }
}
