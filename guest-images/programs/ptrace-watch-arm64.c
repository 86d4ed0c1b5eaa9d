/*
 * ptrace-watch-arm64: the guest's own arm64 watchpoint registers (DBGWVR0/DBGWCR0), set through
 * ptrace (issue 28); the arm64 counterpart of ptrace-watch.c.
 * Forks; the child writes its variable once (so its page is its own after fork's copy-on-write),
 * prints the variable's address, makes an empty write(2) whose buffer is the variable, stops
 * itself; the parent sets watchpoint 0 on the variable with PTRACE_SETREGSET NT_ARM_HW_WATCH
 * (address; control = enabled | EL0 | store | BAS 0xff: 8 bytes, as Linux's decode_ctrl_reg reads
 * it), continues the child, which writes the variable WRITES times, and counts the SIGTRAPs whose
 * siginfo is a hardware watchpoint (TRAP_HWBKPT) at the variable's address. arm64 watchpoints
 * trap BEFORE the access (the store is not made, the pc is the storing instruction), so after each
 * trap the parent does what gdb does: disables the watchpoint, single-steps the child over the
 * store (PTRACE_SINGLESTEP), enables it again and continues.
 * Prints "ptrace-watch: address 0x..." and "ptrace-watch: traps N of M" (the same lines as the
 * x86-64 program). Exit 0 when N == M, 1 otherwise, 2 on a failed system call.
 * Built static by guest-images/record-ptrace-watch.sh arm64 (guest-images/static-cc.sh arm64).
 */
#include <elf.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <asm/ptrace.h>

#define WRITES 5
#ifndef TRAP_HWBKPT
#define TRAP_HWBKPT 4
#endif

static volatile unsigned long watched;
/* Volatile, so the compiler keeps the loop (one store per iteration, a branch after each). */
static volatile int writes = WRITES;

static void fail(const char *what) {
    perror(what);
    exit(2);
}

/* Watchpoint 0 of the child: ADDR, enabled or not (8 bytes, stores, EL0). */
static void set_watch(pid_t child, unsigned long addr, int enabled) {
    struct user_hwdebug_state state;
    memset(&state, 0, sizeof state);
    state.dbg_regs[0].addr = addr;
    state.dbg_regs[0].ctrl = (enabled ? 1u : 0u) | (2u << 1) | (2u << 3) | (0xffu << 5);
    struct iovec iov = { &state, offsetof(struct user_hwdebug_state, dbg_regs) + sizeof state.dbg_regs[0] };
    if (ptrace(PTRACE_SETREGSET, child, (void *) NT_ARM_HW_WATCH, &iov) != 0) fail("PTRACE_SETREGSET NT_ARM_HW_WATCH");
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
    unsigned long addr = (unsigned long) &watched;
    set_watch(child, addr, 1);
    int traps = 0, others = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, child, 0, 0) != 0) fail("PTRACE_CONT");
        if (waitpid(child, &status, 0) != child) fail("waitpid");
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) { others++; continue; }
        siginfo_t si;
        if (ptrace(PTRACE_GETSIGINFO, child, 0, &si) != 0) fail("PTRACE_GETSIGINFO");
        if (si.si_code != TRAP_HWBKPT || (unsigned long) si.si_addr != addr) { others++; continue; }
        traps++;
        /* step over the store with the watchpoint off, as gdb does on arm64 */
        set_watch(child, addr, 0);
        if (ptrace(PTRACE_SINGLESTEP, child, 0, 0) != 0) fail("PTRACE_SINGLESTEP");
        if (waitpid(child, &status, 0) != child) fail("waitpid (step)");
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        set_watch(child, addr, 1);
    }
    if (others) printf("ptrace-watch: other stops %d\n", others);
    printf("ptrace-watch: traps %d of %d\n", traps, WRITES);
    return traps == WRITES ? 0 : 1;
}
