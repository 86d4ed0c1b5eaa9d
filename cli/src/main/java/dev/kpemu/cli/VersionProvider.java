package dev.kpemu.cli;

import picocli.CommandLine;

import dev.kpemu.unicorn.Unicorn;

/** {@code kpemu --version}: our version and the native engines'. */
final class VersionProvider implements CommandLine.IVersionProvider {
    @Override public String[] getVersion() {
        String ours = Main.class.getPackage().getImplementationVersion();
        return new String[] {"kpemu " + (ours != null ? ours : "0.1.0-SNAPSHOT"), "Unicorn " + Unicorn.version(),
                "Java " + Runtime.version()};
    }
}
