/*
 * kbench: the guest micro-benchmarks of `kpemu bench guest` (guest-images/build-guest-bench.sh
 * builds it statically for each arch). One benchmark per run, a fixed number of iterations:
 *
 *   kbench syscall N    N x getppid()
 *   kbench fault N      N x (mmap 16 anonymous pages, write one byte to each, munmap)
 *   kbench yield N      two processes, each N x sched_yield() (2N context switches on one CPU)
 *   kbench forkexec N   N x (fork, execve of "kbench exit", waitpid)
 *   kbench pipe N       N round trips of one byte between two processes over two pipes
 *   kbench fs N         N x (create /tmp/kbench.N, write 4 KiB, close, open, read, close, unlink)
 *   kbench exit         exits 0 at once (the program forkexec runs)
 *
 * Prints "kbench NAME N done" when every iteration succeeded; on a failed call prints the call
 * and errno and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail(const char *what) {
    printf("kbench: %s failed: %s\n", what, strerror(errno));
    fflush(stdout);
    _exit(1);
}

static void bench_syscall(long n) {
    for (long i = 0; i < n; i++)
        if (getppid() < 0) fail("getppid");
}

static void bench_fault(long n) {
    const long pages = 16, size = pages * 4096;
    for (long i = 0; i < n; i++) {
        volatile char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail("mmap");
        for (long k = 0; k < pages; k++) p[k * 4096] = (char) k;
        if (munmap((void *) p, size) != 0) fail("munmap");
    }
}

static void wait_child(pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) != pid) fail("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { errno = 0; fail("child"); }
}

static void bench_yield(long n) {
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    for (long i = 0; i < n; i++) sched_yield();
    if (pid == 0) _exit(0);
    wait_child(pid);
}

static void bench_forkexec(long n, const char *self) {
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) fail("fork");
        if (pid == 0) {
            char *argv[] = {(char *) self, "exit", NULL};
            char *envp[] = {NULL};
            execve(self, argv, envp);
            _exit(127);
        }
        wait_child(pid);
    }
}

static void bench_pipe(long n) {
    int there[2], back[2];
    char c = 'x';
    if (pipe(there) != 0 || pipe(back) != 0) fail("pipe");
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        for (long i = 0; i < n; i++) {
            if (read(there[0], &c, 1) != 1) fail("read (child)");
            if (write(back[1], &c, 1) != 1) fail("write (child)");
        }
        _exit(0);
    }
    for (long i = 0; i < n; i++) {
        if (write(there[1], &c, 1) != 1) fail("write");
        if (read(back[0], &c, 1) != 1) fail("read");
    }
    wait_child(pid);
}

static void bench_fs(long n) {
    static char block[4096];
    char name[64];
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "/tmp/kbench.%ld", i);
        memset(block, (int) i, sizeof block);
        int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) fail("open (create)");
        if (write(fd, block, sizeof block) != (ssize_t) sizeof block) fail("write");
        if (close(fd) != 0) fail("close");
        fd = open(name, O_RDONLY);
        if (fd < 0) fail("open (read)");
        if (read(fd, block, sizeof block) != (ssize_t) sizeof block || block[4095] != (char) i) fail("read");
        if (close(fd) != 0) fail("close");
        if (unlink(name) != 0) fail("unlink");
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "exit") == 0) return 0;
    if (argc != 3) {
        fprintf(stderr, "usage: kbench syscall|fault|yield|forkexec|pipe|fs N\n");
        return 2;
    }
    const char *name = argv[1];
    char *end;
    long n = strtol(argv[2], &end, 10);
    if (*end != '\0' || n < 0) {
        fprintf(stderr, "kbench: bad count '%s'\n", argv[2]);
        return 2;
    }
    if (strcmp(name, "syscall") == 0) bench_syscall(n);
    else if (strcmp(name, "fault") == 0) bench_fault(n);
    else if (strcmp(name, "yield") == 0) bench_yield(n);
    else if (strcmp(name, "forkexec") == 0) bench_forkexec(n, "/bin/kbench");
    else if (strcmp(name, "pipe") == 0) bench_pipe(n);
    else if (strcmp(name, "fs") == 0) bench_fs(n);
    else {
        fprintf(stderr, "kbench: unknown benchmark '%s'\n", name);
        return 2;
    }
    printf("kbench %s %ld done\n", name, n);
    return 0;
}
