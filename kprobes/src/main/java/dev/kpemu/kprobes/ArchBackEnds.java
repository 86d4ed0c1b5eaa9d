package dev.kpemu.kprobes;

import dev.kpemu.kprobes.arm64.Arm64KernelText;
import dev.kpemu.kprobes.arm64.Arm64Kprobes;
import dev.kpemu.kprobes.arm64.Arm64ProbeDecoder;
import dev.kpemu.kprobes.x86.X86KernelText;
import dev.kpemu.kprobes.x86.X86Kprobes;
import dev.kpemu.kprobes.x86.X86ProbeDecoder;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * The one place in the generic engine that names the arches: it picks each arch's back end
 * ({@link ArchKprobes}, {@link ProbeDecoder}, {@link ArchSiteRules}, {@link ArchKernelText}); everything else asks the
 * back end and never branches on the arch.
 */
final class ArchBackEnds {
    private ArchBackEnds() {}

    static ArchKprobes kprobes(Machine machine) {
        return switch (machine.arch()) {
            case X86_64 -> new X86Kprobes(machine);
            case ARM64 -> new Arm64Kprobes(machine);
        };
    }

    static ProbeDecoder decoder(Arch arch) {
        return switch (arch) {
            case X86_64 -> new X86ProbeDecoder();
            case ARM64 -> new Arm64ProbeDecoder();
        };
    }

    static ArchKernelText kernelText(Arch arch) {
        return switch (arch) {
            case X86_64 -> X86KernelText.INSTANCE;
            case ARM64 -> Arm64KernelText.INSTANCE;
        };
    }

    static ArchSiteRules siteRules(Arch arch) {
        return switch (arch) {
            case X86_64 -> X86Kprobes.SITE_RULES;
            case ARM64 -> Arm64Kprobes.SITE_RULES;
        };
    }
}
