package dev.kpemu.image;

/** The guest architectures kpemu boots, with the names the guest-images scripts and Debian use. */
public enum GuestArch {
    X86_64("x86_64", "amd64", 62),
    ARM64("arm64", "arm64", 183);

    private final String scriptName;
    private final String debianName;
    private final int elfMachine;

    GuestArch(String scriptName, String debianName, int elfMachine) {
        this.scriptName = scriptName;
        this.debianName = debianName;
        this.elfMachine = elfMachine;
    }

    /** The name the guest-images scripts and the cache directory use: {@code x86_64}, {@code arm64}. */
    public String scriptName() { return scriptName; }

    /** Debian's architecture name: {@code amd64}, {@code arm64}. */
    public String debianName() { return debianName; }

    /** ELF e_machine: EM_X86_64 (62), EM_AARCH64 (183). */
    public int elfMachine() { return elfMachine; }

    public static GuestArch parse(String s) {
        return switch (s.toLowerCase(java.util.Locale.ROOT)) {
            case "x86_64", "x86-64", "amd64", "x64" -> X86_64;
            case "arm64", "aarch64" -> ARM64;
            default -> throw new IllegalArgumentException("unknown guest architecture '" + s + "' (expected x86_64 or arm64)");
        };
    }
}
