/*
 * ptrace-watch: the guest's own x86-64 debug registers, set through ptrace (issue 28).
 * Forks; the child writes its variable once (so its page is its own after fork's copy-on-write),
 * prints the variable's address, stops itself; the parent sets DR0 = &variable and
 * DR7 = L0 | RW0=01 (writes) | LEN0=11 (8 bytes) with PTRACE_POKEUSER, continues the child, which
 * writes the variable WRITES times, and counts the SIGTRAPs (one per write: x86 data breakpoints
 * trap after the access). The child also makes an empty write(2) whose buffer is the variable. Prints "ptrace-watch: address 0x... " and "ptrace-watch: traps N of M".
 * Exit 0 when N == M, 1 otherwise, 2 on a failed system call.
 * Built static by the tests (guest-images/static-cc.sh x86_64) and by record-ptrace-watch.sh.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITES 5

static volatile unsigned long watched;
/* Volatile, so the compiler keeps the loop (one store per iteration, a branch after each) rather
 * than five stores in a row: kpemu delivers a guest data breakpoint's #DB at the end of the
 * translated block of the access (X86DebugRegisters), where the hardware traps right after it. */
static volatile int writes = WRITES;

static void fail(const char *what) {
    perror(what);
    exit(2);
}

int main(void) {
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) {
        watched = 1;
        printf("ptrace-watch: address %p\n", (void *) &watched);
        fflush(stdout);
        /* An empty write whose buffer is the variable: a probe of the kernel's ksys_write (buf,
         * count == 0) sees its address in the child's address space (kpemu's coexistence test). */
        if (write(1, (const void *) &watched, 0) != 0) fail("write");
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) fail("PTRACE_TRACEME");
        raise(SIGSTOP);
        for (int i = 0; i < writes; i++) watched = 100 + i;
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) fail("waitpid (stop)");
    unsigned long dr7 = 1UL | (1UL << 16) | (3UL << 18);
    if (ptrace(PTRACE_POKEUSER, child, offsetof(struct user, u_debugreg[0]), (void *) &watched) != 0) fail("POKEUSER DR0");
    if (ptrace(PTRACE_POKEUSER, child, offsetof(struct user, u_debugreg[7]), (void *) dr7) != 0) fail("POKEUSER DR7");
    int traps = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, child, 0, 0) != 0) fail("PTRACE_CONT");
        if (waitpid(child, &status, 0) != child) fail("waitpid");
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) traps++;
    }
    printf("ptrace-watch: traps %d of %d\n", traps, WRITES);
    return traps == WRITES ? 0 : 1;
}
