package dev.kpemu.image;

import dev.kpemu.natives.BundledFiles;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The repository's guest fetch scripts ({@code guest-images/fetch-kernel.sh}, {@code fetch-busybox.sh},
 * {@code fetch-modules.sh} and the {@code apt-private.sh} they share) as kpemu-emulator's jar carries
 * them: without a checkout they are unpacked into {@code <cache>/scripts/<hash>/guest-images/} and
 * run from there, fetching into the same cache.
 */
final class GuestScripts {
    static final String RESOURCES = "/dev/kpemu/image/guest-images/";
    static final List<String> NAMES = List.of("fetch-kernel.sh", "fetch-busybox.sh", "fetch-modules.sh", "apt-private.sh");

    private GuestScripts() {}

    /** True when the jars carry the scripts. */
    static boolean bundled() {
        return BundledFiles.read(RESOURCES + NAMES.getFirst()) != null;
    }

    /**
     * The scripts unpacked under {@code cache}: a directory whose {@code guest-images/} holds them
     * (what {@link GuestImages} takes as the repository root), named by their contents' hash.
     */
    static Path unpack(Path cache) throws KernelImageException {
        Map<String, String> sums = new LinkedHashMap<>();
        StringBuilder all = new StringBuilder();
        for (String name : NAMES) {
            byte[] b = BundledFiles.read(RESOURCES + name);
            if (b == null) throw new KernelImageException("kpemu's jars lack the guest script " + name);
            String sha = BundledFiles.sha256(b);
            sums.put(name, sha);
            all.append(sha).append(' ').append(name).append('\n');
        }
        String tag = BundledFiles.sha256(all.toString().getBytes(StandardCharsets.UTF_8)).substring(0, 16);
        Path root = cache.resolve("scripts").resolve(tag);
        BundledFiles.unpack(RESOURCES, sums, root.resolve("guest-images"), Set.copyOf(NAMES), line -> { });
        return root;
    }
}
