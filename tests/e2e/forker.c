/* SPDX-License-Identifier: MIT */
/* forker.c - target for tests/e2e/inert.sh: prints how many threads it has, runs argv[1..] in a
 * forked child and exits with the child's status. */
#include <dirent.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int threads = 0, st = 0;
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; d && (e = readdir(d));)
		threads += e->d_name[0] != '.';
	if (d)
		closedir(d);
	printf("threads=%d\n", threads);
	fflush(stdout);
	if (argc < 2)
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
