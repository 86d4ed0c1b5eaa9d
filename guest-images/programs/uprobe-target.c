/*
 * The user's program of the uprobe recordings (guest-images/record-uprobes-prog.sh) and of
 * kpemu's tests against them (kpemu boot --add PROG -- PROG): a recursive function for return
 * probes (fact), a function called in a loop with an integer and a string (greet), and a fork()
 * whose child calls greet too. Its output and its calls are the same on every run.
 * Built static (guest-images/build-uprobe-target.sh), without optimisation so that every
 * function keeps its own frame and is entered by a call.
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long fact(long n)
{
	if (n <= 1)
		return 1;
	return n * fact(n - 1);
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
