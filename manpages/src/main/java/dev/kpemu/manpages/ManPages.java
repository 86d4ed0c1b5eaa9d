package dev.kpemu.manpages;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.asciidoctor.Asciidoctor;
import org.asciidoctor.Options;
import org.asciidoctor.SafeMode;

import picocli.AutoComplete;
import picocli.CommandLine;
import picocli.codegen.docgen.manpage.ManPageGenerator;

/**
 * Writes kpemu's man pages and bash completion from the CLI's picocli model, so they say what
 * {@code kpemu --help} says:
 * <ul>
 *   <li>{@code OUT/adoc/kpemu.adoc}, {@code kpemu-boot.adoc}, ...: picocli-codegen's AsciiDoc, one
 *   page per command;</li>
 *   <li>{@code OUT/man1/kpemu.1}, {@code kpemu-boot.1}, ...: those converted to troff by AsciidoctorJ's
 *   manpage back end;</li>
 *   <li>{@code OUT/bash-completion/kpemu}: picocli's {@code AutoComplete} script.</li>
 * </ul>
 * Usage: {@code ManPages OUT}.
 */
public final class ManPages {
    private ManPages() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: ManPages OUTPUT_DIR");
            System.exit(2);
        }
        Path out = Path.of(args[0]);
        Path adoc = Files.createDirectories(out.resolve("adoc"));
        Path man1 = Files.createDirectories(out.resolve("man1"));
        Path completion = Files.createDirectories(out.resolve("bash-completion"));

        CommandLine cl = dev.kpemu.cli.Main.commandLine();
        int rc = ManPageGenerator.generateManPage(adoc.toFile(), null, new boolean[0], true, cl.getCommandSpec());
        if (rc != 0) throw new IOException("picocli's ManPageGenerator failed (" + rc + ")");

        List<Path> pages;
        try (Stream<Path> s = Files.list(adoc)) {
            pages = s.filter(p -> p.toString().endsWith(".adoc")).sorted().toList();
        }
        try (Asciidoctor asciidoctor = Asciidoctor.Factory.create()) {
            for (Path page : pages) {
                asciidoctor.convertFile(page.toFile(), Options.builder().backend("manpage").safe(SafeMode.UNSAFE)
                        .toDir(man1.toFile()).mkDirs(true).build());
            }
        }
        Files.writeString(completion.resolve("kpemu"), AutoComplete.bash("kpemu", cl));
        File[] written = man1.toFile().listFiles();
        System.out.println(out + ": " + pages.size() + " AsciiDoc pages, " + (written == null ? 0 : written.length) + " man pages, bash completion");
    }
}
