/* SPDX-License-Identifier: MIT */
/* segv_bt.c - a debugging aid for GPU runs (not part of the product): preloaded beside
 * libstepprof.so, it prints the crashing thread's native backtrace (object+offset, symbol) to
 * stderr on SIGSEGV, SIGBUS or SIGABRT, then lets the signal kill the process as before.
 * Build: gcc -O1 -g -shared -fPIC -o segv_bt.so segv_bt.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	void *pc[64];
	int n = backtrace(pc, 64);
	char line[512];
	int k = snprintf(line, sizeof line, "segv_bt: signal %d at %p in thread %ld, %d frames\n", sig, si->si_addr,
			 (long)syscall(SYS_gettid), n);
	write(2, line, (size_t)k);
	for (int i = 0; i < n; i++) {
		Dl_info di = { 0 };
		dladdr(pc[i], &di);
		k = snprintf(line, sizeof line, "segv_bt:   #%d %s+%#lx %s\n", i, di.dli_fname ? di.dli_fname : "?",
			     (unsigned long)((char *)pc[i] - (char *)di.dli_fbase), di.dli_sname ? di.dli_sname : "");
		write(2, line, (size_t)k);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void segv_bt_init(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
}
