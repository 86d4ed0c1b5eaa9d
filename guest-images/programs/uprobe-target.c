/*
 * The user's program of the uprobe recordings (guest-images/record-uprobes-prog.sh) and of
 * kpemu's tests against them (kpemu boot --add PROG -- PROG): a recursive function for return
 * probes (fact), a function called in a loop with an integer and a string (greet), a recursion
 * left by longjmp() from its innermost call and then run again to its end (dive: return probes
 * whose frames a longjmp abandoned), and a fork() whose child calls greet too. Its output and its
 * calls are the same on every run.
 * Built static (guest-images/build-uprobe-target.sh), without optimisation so that every
 * function keeps its own frame and is entered by a call.
 */
#include <setjmp.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long fact(long n)
{
	if (n <= 1)
		return 1;
	return n * fact(n - 1);
}

static jmp_buf out_of_dive;

/* Dives n levels; at the bottom, longjmp()s out of every level when asked to. */
__attribute__((noinline)) long dive(long n, int jump)
{
	if (n == 0) {
		if (jump)
			longjmp(out_of_dive, 1);
		return 0;
	}
	return dive(n - 1, jump) + 1;
}

__attribute__((noinline)) int greet(int round, const char *name)
{
	return printf("round %d: hello %s\n", round, name);
}

int main(void)
{
	static const char *const names[] = { "alpha", "beta", "gamma" };
	int status = 0;
	pid_t child;

	for (int i = 0; i < 3; i++)
		greet(i, names[i]);
	printf("fact(4) = %ld\n", fact(4));
	if (setjmp(out_of_dive) == 0)
		dive(3, 1);
	printf("dive(2) = %ld after a longjmp\n", dive(2, 0));
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		greet(7, "child");
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return 1;
	printf("child exited %d\n", WEXITSTATUS(status));
	return 0;
}
