package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu bench job}'s definitions in both dialects ({@link JobDefinitions}): the repository's
 * files as kpemu reads them, and a listing as {@code kpemu check-events} writes it for Linux.
 */
class JobDefinitionsTest {
    @ParameterizedTest
    @ValueSource(strings = {"x86_64", "arm64"})
    void repositoryFilesHoldTheJobsProbes(String arch) throws IOException {
        Path f = NativeLibraries.repositoryRoot().resolve("guest-images/reference/job." + arch + ".events");
        List<String> d = JobDefinitions.parse(Files.readString(f));
        assertEquals(8, d.size(), d.toString());
        assertEquals(List.of("p:jobsec/ security_*"), d.stream().filter(ProbeGlob::isGlob).toList());
        assertTrue(d.stream().anyMatch(l -> l.startsWith("r:")), "kretprobes");
        assertTrue(d.stream().anyMatch(l -> l.contains(":ustring")) && d.stream().anyMatch(l -> l.contains(":string")), "string fetches");
        assertTrue(d.stream().noneMatch(l -> l.contains("#")), "comments dropped");
    }

    @Test
    void parseDropsCommentsAndBlankLines() {
        assertEquals(List.of("p:a do_sys_openat2", "r:b vfs_read ret=$retval"),
                JobDefinitions.parse("# head\n\np:a do_sys_openat2   # trailing\n  r:b vfs_read ret=$retval\n"));
    }

    private static final List<String> LINUX = List.of(
            "p:kprobes/jobopen do_sys_openat2 dfd=%di fn=+0(%si):ustring",
            "r10:kprobes/jobopenr do_sys_openat2 ret=$retval",
            "p:jobsec/p_security_file_open_0 security_file_open",
            "p:jobsec/p_security_file_permission_0 security_file_permission");

    @Test
    void groupsOfTheLinuxListing() {
        assertEquals(List.of("jobsec", "kprobes"), JobDefinitions.groups(LINUX));
        assertEquals(List.of("kprobes"), JobDefinitions.groups(List.of("p do_sys_openat2", "r:x vfs_read")));
        assertThrows(IllegalArgumentException.class, () -> JobDefinitions.groups(List.of("kpemu: a message")));
    }

    @Test
    void listingMustKeepEverySingleEventAndAGlobsMatches() {
        List<String> kpemu = List.of("p:jobopen do_sys_openat2 dfd=%di fn=+0(%si):ustring", "r:jobopenr do_sys_openat2 ret=$retval",
                "p:jobsec/ security_file_*");
        JobDefinitions.checkListing(kpemu, LINUX);
        assertThrows(IllegalArgumentException.class, () -> JobDefinitions.checkListing(kpemu, LINUX.subList(0, 2)), "the glob's matches are missing");
        assertThrows(IllegalArgumentException.class,
                () -> JobDefinitions.checkListing(List.of("p:jobread vfs_read", "p:jobsec/ security_*"), LINUX), "jobread is not listed");
    }
}
