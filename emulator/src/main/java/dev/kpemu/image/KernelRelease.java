package dev.kpemu.image;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * A kernel's release ({@code uname -r}) read from its own {@code linux_banner}
 * ("Linux version RELEASE (builder) ..."), which every kernel image holds as plain text.
 */
public final class KernelRelease {
    private static final byte[] BANNER = "Linux version ".getBytes(StandardCharsets.US_ASCII);

    private KernelRelease() {}

    /** The release of the first banner in {@code image} whose release starts with a digit, if any. */
    public static Optional<String> of(byte[] image) {
        byte first = BANNER[0];
        for (int i = 0; i + BANNER.length + 2 < image.length; i++) {
            // a tight loop over the first byte, the rest only where it matches: the whole-file
            // search (arm64, whose kallsyms names no linux_banner) took ~0.1 s of CPU calling at() per byte
            if (image[i] != first) continue;
            Optional<String> r = at(image, i);
            if (r.isPresent()) return r;
        }
        return Optional.empty();
    }

    /** As {@link #of(byte[])}, reading the file in windows when it is not in memory. */
    public static Optional<String> of(OnDemandFileBytes file) {
        if (file.loaded()) return of(file.bytes());
        byte first = BANNER[0];
        String[] found = {null};
        file.scan(BANNER.length + 80, (windowAt, w, from, to, len) -> {
            for (int i = from; i < to; i++) {
                if (w[i] != first) continue;
                Optional<String> r = at(w, len, i);
                if (r.isPresent()) {
                    found[0] = r.get();
                    return true;
                }
            }
            return false;
        });
        return Optional.ofNullable(found[0]);
    }

    /**
     * The release of the banner at {@code offset} (the file offset of the kernel's
     * {@code linux_banner} symbol, which spares {@link #of} a search through the whole image),
     * if a banner whose release starts with a digit is there.
     */
    public static Optional<String> at(byte[] image, long offset) {
        return at(image, image.length, offset);
    }

    /** As {@link #at(byte[], long)} in {@code image[0, length)}. */
    private static Optional<String> at(byte[] image, int length, long offset) {
        if (offset < 0 || offset + BANNER.length + 2 >= length) return Optional.empty();
        int i = (int) offset;
        for (int k = 0; k < BANNER.length; k++) if (image[i + k] != BANNER[k]) return Optional.empty();
        int s = i + BANNER.length, e = s;
        while (e < length && e - s < 64 && image[e] > ' ' && image[e] < 0x7f) e++;
        if (e > s && Character.isDigit(image[s]) && e < length && image[e] == ' ') {
            return Optional.of(new String(image, s, e - s, StandardCharsets.US_ASCII));
        }
        return Optional.empty();
    }
}
