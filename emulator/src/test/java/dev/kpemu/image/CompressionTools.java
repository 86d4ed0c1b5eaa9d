package dev.kpemu.image;

import dev.kpemu.natives.NativeLibraries;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Debian's own compressors, run the way Linux's build (scripts/Makefile.lib) runs them, so the
 * tests unpack payloads that the code under test did not make. {@code lzop} is not part of a
 * usual Debian install: when it is not on the PATH it is fetched into the cache by
 * {@code scripts/fetch-lzop.sh}.
 */
final class CompressionTools {
    private CompressionTools() {}

    /** The command Linux's build uses for {@code c} (reading stdin, writing stdout). */
    static List<String> command(Compression c) throws IOException {
        return switch (c) {
            case GZIP -> List.of("gzip", "-n", "-f", "-9");
            case BZIP2 -> List.of("bzip2", "-9");
            case LZMA -> List.of("lzma", "-9");
            case XZ -> List.of("xz", "--check=crc32", "--x86", "--lzma2=,dict=32MiB");
            case LZO -> List.of(lzop(), "-9");
            case LZ4 -> List.of("lz4", "-l", "-9");
            case ZSTD -> List.of("zstd", "-22", "--ultra");
        };
    }

    /** {@code data} compressed by Debian's tool for {@code c}. */
    static byte[] compress(Compression c, byte[] data) throws IOException, InterruptedException {
        return run(new ProcessBuilder(command(c)), data);
    }

    static byte[] run(ProcessBuilder pb, byte[] input) throws IOException, InterruptedException {
        List<String> cmd = pb.command();
        Process p = pb.start();
        CompletableFuture<byte[]> out = CompletableFuture.supplyAsync(() -> readAll(p.getInputStream()));
        CompletableFuture<byte[]> err = CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
        try (OutputStream in = p.getOutputStream()) {
            in.write(input);
        }
        if (!p.waitFor(5, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            throw new IOException(cmd + " timed out");
        }
        if (p.exitValue() != 0) {
            throw new IOException(cmd + " failed (exit " + p.exitValue() + "): " + new String(err.join(), StandardCharsets.UTF_8).trim());
        }
        return out.join();
    }

    private static byte[] readAll(java.io.InputStream s) {
        try {
            return s.readAllBytes();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static String lzop;

    /** {@code lzop} from the PATH, else Debian's package fetched into the cache. */
    static synchronized String lzop() throws IOException {
        if (lzop != null) return lzop;
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "lzop"))) return lzop = Path.of(dir, "lzop").toString();
        }
        Path root = NativeLibraries.repositoryRoot();
        if (root == null) throw new IOException("lzop is not installed and the kpemu repository (scripts/fetch-lzop.sh) was not found");
        ProcessBuilder pb = new ProcessBuilder("bash", root.resolve("scripts/fetch-lzop.sh").toString());
        try {
            pb.environment().put("KPEMU_CACHE", GuestImages.forRepository().cacheRoot().toString());
        } catch (KernelImageException e) {
            throw new IOException(e.getMessage(), e);
        }
        try {
            String out = new String(run(pb, new byte[0]), StandardCharsets.UTF_8).trim();
            return lzop = out.lines().reduce((a, b) -> b).orElseThrow();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while fetching lzop", e);
        }
    }
}
