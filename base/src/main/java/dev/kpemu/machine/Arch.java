package dev.kpemu.machine;

/** The guest architectures kpemu emulates. */
public enum Arch {
    X86_64("x86_64"),
    ARM64("arm64");

    private final String linuxName;

    Arch(String linuxName) { this.linuxName = linuxName; }

    /** The name Linux and the CLI use ({@code x86_64}, {@code arm64}). */
    public String linuxName() { return linuxName; }

    /** Parses {@code x86_64}/{@code amd64}/{@code x86-64} and {@code arm64}/{@code aarch64}. */
    public static Arch parse(String s) {
        return switch (s.toLowerCase(java.util.Locale.ROOT)) {
            case "x86_64", "x86-64", "amd64", "x64" -> X86_64;
            case "arm64", "aarch64" -> ARM64;
            default -> throw new IllegalArgumentException("unknown architecture '" + s + "' (expected x86_64 or arm64)");
        };
    }
}
