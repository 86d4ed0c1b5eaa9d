package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.KernelTextTables;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.fail.ErrorInjectionList;
import dev.kpemu.kprobes.fail.FailSpec;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * Which functions {@code --fail} may fail without {@code --allow-unsafe}: those on the kernel's
 * error-injection list, the recorded {@code guest-images/reference/error-injection/ARCH/SERIES.list}
 * of the chosen Debian kernel's series (a suite without a release: its pinned build in
 * {@code guest-images/reference/kernels}); for a kernel file built with
 * CONFIG_FUNCTION_ERROR_INJECTION (a kernel built from source), the kernel's own
 * {@code _error_injection_whitelist} ({@link KernelTextTables#errorInjectionWhitelist}). Any other
 * kernel is refused.
 */
final class ErrorInjectionCheck {
    private ErrorInjectionCheck() {}

    /** The recorded list for {@code choice} on {@code arch}, if there is one. */
    static Optional<ErrorInjectionList> listFor(KernelChoice choice, Arch arch) throws IOException {
        if (choice instanceof KernelChoice.File f) return ownList(f.path(), arch);
        Path root = NativeLibraries.repositoryRoot();
        if (root == null || !(choice instanceof KernelChoice.Debian d)) return Optional.empty();
        String release = d.release();
        if (release == null) release = pinnedRelease(root, d.suite() == null ? "bookworm" : d.suite());
        if (release == null) return Optional.empty();
        return ErrorInjectionList.recorded(root.resolve("guest-images/reference"), arch.linuxName(), ReferenceTrace.series(release));
    }

    /** A one-line refusal for the first spec not allowed, or null when all are. */
    static String refusal(KernelChoice choice, Arch arch, List<FailSpec> specs) throws IOException {
        if (specs.isEmpty()) return null;
        Optional<ErrorInjectionList> list = listFor(choice, arch);
        if (list.isEmpty())
            return "--fail: no error-injection list is known for this kernel (recorded for Debian's 6.1, 6.12 and 7.2 series; a kernel built with CONFIG_FUNCTION_ERROR_INJECTION carries its own); --allow-unsafe fails any function";
        for (FailSpec s : specs) {
            if (!list.get().allows(s.function()))
                return "--fail: " + s.function() + " is not on the kernel's error-injection list; --allow-unsafe fails it anyway";
        }
        return null;
    }

    /** The list a kernel file carries, if it carries one. */
    private static Optional<ErrorInjectionList> ownList(Path kernel, Arch arch) throws IOException {
        Kallsyms.KernelText kt;
        try {
            kt = Kallsyms.load(kernel);
        } catch (KernelImageException e) {
            return Optional.empty();
        }
        ErrorInjectionList.EType[] types = ErrorInjectionList.EType.values();
        java.util.Map<String, ErrorInjectionList.EType> named = new java.util.TreeMap<>();
        KernelTextTables.errorInjectionWhitelist(arch, kt.symbols(), kt.bytes()).forEach((address, etype) -> {
            var sym = kt.symbols().lookup(address);
            if (sym.isPresent() && sym.get().address() == address && etype >= 0 && etype < types.length) named.put(sym.get().name(), types[etype]);
        });
        return named.isEmpty() ? Optional.empty() : Optional.of(ErrorInjectionList.of(named));
    }

    private static String pinnedRelease(Path root, String suite) throws IOException {
        Path kernels = root.resolve("guest-images/reference/kernels");
        if (!Files.isRegularFile(kernels)) return null;
        for (String line : Files.readAllLines(kernels)) {
            String[] f = line.strip().split("\\s+");
            if (f.length == 2 && !line.startsWith("#") && f[0].equals(suite)) return f[1];
        }
        return null;
    }
}
