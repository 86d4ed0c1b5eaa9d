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
        java.util.Map<String, String> debian = dev.kpemu.natives.NativeLibraries.versions();
        return new String[] {"kpemu " + kpemuVersion(),
                "Unicorn " + Unicorn.version() + from(debian.get("unicorn")),
                "Capstone " + dev.kpemu.decoder.Capstone.version() + from(debian.get("capstone")),
                "Java " + Runtime.version() + " (" + System.getProperty("java.vm.name") + ", " + System.getProperty("java.vendor") + ")"};
    }

    /** " (Debian package V)" for the Debian version the library was fetched as, or nothing. */
    private static String from(String debianVersion) {
        return debianVersion == null ? "" : " (Debian " + debianVersion + ")";
    }
}
