package dev.kpemu.image;

import java.nio.file.Path;
import java.util.List;

/**
 * Which kernel to boot, as {@code --kernel} names it: a file ({@link File}), or Debian's newest
 * kernel of a suite ({@link Debian}), fetched by {@code guest-images/fetch-kernel.sh --suite}.
 *
 * <ul>
 *   <li>{@code debian} — the machine's own suite (/etc/os-release), the default guest;</li>
 *   <li>{@code debian:SUITE} — {@code bookworm}, {@code trixie}, {@code stable}, {@code oldstable},
 *       {@code sid} or {@code unstable} (the same suite, cached as {@code sid}), or
 *       {@code bookworm-backports}, {@code trixie-backports}, {@code stable-backports},
 *       {@code oldstable-backports};</li>
 *   <li>{@code debian:SUITE@RELEASE} (or {@code debian@RELEASE}) — one build of that suite's
 *       kernel, named by the release {@code uname -r} prints, with or without the architecture
 *       suffix ({@code debian:trixie@6.12.117+deb13}): the package
 *       {@code linux-image-RELEASE}, as long as the suite's archives hold it. Traces recorded on
 *       one build are compared on that build;</li>
 *   <li>anything else is a file path.</li>
 * </ul>
 * The archive's aliases ({@code stable}, {@code oldstable}) are cached under the alias, not the
 * code name it points to today: {@code --refresh} (re-fetching) follows the alias.
 */
public sealed interface KernelChoice {
    /** The prefix of a Debian choice. */
    String DEBIAN = "debian";

    /** The suites {@code debian:SUITE} accepts (keep in step with guest-images/apt-private.sh). */
    List<String> SUITES = List.of("bookworm", "trixie", "stable", "oldstable", "sid", "unstable",
            "bookworm-backports", "trixie-backports", "stable-backports", "oldstable-backports");

    /** The suites {@code kpemu images --resolve} asks the mirror about. */
    List<String> RESOLVED_BY_DEFAULT = List.of("bookworm", "bookworm-backports", "trixie", "trixie-backports", "sid");

    /** The default guest: Debian's kernel of the machine's own suite. */
    Debian DEFAULT = new Debian(null);

    /** A kernel image file (x86_64: bzImage or vmlinux; arm64: Image). */
    record File(Path path) implements KernelChoice {
        @Override public String toString() { return path.toString(); }
    }

    /**
     * Debian's kernel of {@code suite} (null: the machine's own suite): its newest build when
     * {@code release} is null, else the build whose {@code uname -r} is {@code release} (with or
     * without the {@code -amd64}/{@code -arm64} suffix: without it, one choice names the same
     * build on both architectures; with it, only that architecture's).
     */
    record Debian(String suite, String release) implements KernelChoice {
        public Debian {
            if (suite != null) suite = normalize(suite);
            if (release != null) release = normalizeRelease(release);
        }

        /** The suite's newest kernel. */
        public Debian(String suite) { this(suite, null); }

        /** The suite the cache and the fetch script use: {@code suite}, or {@code host} when null. */
        public String suiteOr(String host) { return suite != null ? suite : host; }

        /** The same suite's build {@code release}. */
        public Debian at(String release) { return new Debian(suite, release); }

        @Override public String toString() {
            return (suite == null ? DEBIAN : DEBIAN + ":" + suite) + (release == null ? "" : "@" + release);
        }
    }

    /**
     * Parses a {@code --kernel} value. {@code debian} and {@code debian:SUITE} are Debian
     * choices; an unknown suite is an {@link IllegalArgumentException} with a one-line message.
     */
    static KernelChoice parse(String value) {
        if (value == null || value.isBlank()) throw new IllegalArgumentException("empty kernel choice (a FILE or debian:SUITE)");
        if (value.equals(DEBIAN)) return DEFAULT;
        if (value.startsWith(DEBIAN + "@")) return new Debian(null, value.substring(DEBIAN.length() + 1));
        if (value.startsWith(DEBIAN + ":")) {
            String rest = value.substring(DEBIAN.length() + 1);
            int at = rest.indexOf('@');
            return at < 0 ? new Debian(rest) : new Debian(rest.substring(0, at), rest.substring(at + 1));
        }
        return new File(Path.of(value));
    }

    /**
     * A kernel release as {@code debian:SUITE@RELEASE} names it; a malformed one is an
     * {@link IllegalArgumentException} with a one-line message.
     */
    static String normalizeRelease(String release) {
        String r = release.strip();
        if (!r.matches("[0-9][0-9A-Za-z.+~-]*")) {
            throw new IllegalArgumentException("bad kernel release '" + release + "' in --kernel debian:SUITE@RELEASE"
                    + " (as uname -r prints it, e.g. 6.12.117+deb13 or 6.12.117+deb13-amd64)");
        }
        return r;
    }

    /** A release without its Debian architecture suffix ({@code 6.12.117+deb13-amd64} is {@code 6.12.117+deb13}). */
    static String withoutArch(String release) {
        for (String arch : List.of("-amd64", "-arm64")) {
            if (release.endsWith(arch)) return release.substring(0, release.length() - arch.length());
        }
        return release;
    }

    /** {@code unstable} is {@code sid}; an unknown suite is an {@link IllegalArgumentException}. */
    static String normalize(String suite) {
        String s = suite.strip().toLowerCase(java.util.Locale.ROOT);
        if (!SUITES.contains(s)) {
            throw new IllegalArgumentException("unknown Debian suite '" + suite + "' in --kernel debian:" + suite
                    + " (bookworm, trixie, stable, oldstable, sid or unstable, <stable suite>-backports)");
        }
        return s.equals("unstable") ? "sid" : s;
    }
}
