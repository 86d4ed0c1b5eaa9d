package dev.kpemu.junit;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.ArgumentsProvider;
import org.junit.jupiter.params.support.AnnotationConsumer;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.machine.Arch;

/** The arguments of {@link KpemuSource}: a session per architecture and kernel, built when the invocation starts. */
final class KpemuSessionsProvider implements ArgumentsProvider, AnnotationConsumer<KpemuSource> {
    private KpemuSource source;

    @Override public void accept(KpemuSource s) { this.source = s; }

    @Override public Stream<? extends Arguments> provideArguments(ExtensionContext context) {
        List<Arguments> all = new ArrayList<>();
        for (Arch arch : source.arch()) {
            for (String kernel : source.kernel()) {
                all.add(Arguments.of(Named.of(arch.linuxName() + " " + kernel, Sessions.build(arch, kernel, source.command(),
                        source.timeoutSeconds(), source.memoryMiB(), source.cpus(), source.schedSeed(), source.events()))));
            }
        }
        return all.stream();
    }
}
