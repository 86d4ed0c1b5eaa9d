package dev.kpemu.cli;

import picocli.CommandLine;

import dev.kpemu.unicorn.Unicorn;

/** {@code kpemu --version}: our version and the native engines'. */
final class VersionProvider implements CommandLine.IVersionProvider {
    /** kpemu's version (the jar's, or the build's when run from classes). */
    static String kpemuVersion() {
        String ours = Main.class.getPackage().getImplementationVersion();
        return ours != null ? ours : "0.1.0-SNAPSHOT";
    }

    @Override public String[] getVersion() {
        return new String[] {"kpemu " + kpemuVersion(), "Unicorn " + Unicorn.version(),
                "Java " + Runtime.version()};
    }
}
