/* SPDX-License-Identifier: MIT */
/* crash_driver.c - a "CUDA program" for tests/e2e/crash.sh that dies inside a window. It starts the
 * injection as the CUDA driver's cuInit does (dlopen of $CUDA_INJECTION64_PATH, then that library's
 * InitializeInjection; the first InitializeInjection in the process without the variable; DRIVER_INJECT
 * names another path, as if the program had changed the variable after the preload), then runs
 * STEPS steps of STEP_US microseconds through the stand-in libcupti: LAUNCHES kernels "k_fake_K"
 * (default 3) and a cudaDeviceSynchronize (its callbacks) each. At step CRASH_AT, after its launches,
 * it ends itself with CRASH: segv (a store through NULL), bus (a read past the end of a mapped
 * file), fpe (an integer division by zero), ill (an undefined instruction), abort, kill (SIGKILL),
 * term (SIGTERM) or int (SIGINT); with CRASH_THREAD=1 on a second thread while the main thread
 * goes on. OWN=before installs a handler of its own for that signal before the injection (it says
 * "driver: own handler", then lets the signal's default action happen); OWN=after installs one in
 * step CRASH_AT, once stepprof's window is open (it says the same and exits 42); OWN=survive installs
 * one before the injection that only says so (for term and int: the program goes on). Prints "driver:
 * injected" once initialised and "driver: done" at a normal end. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cupti.h>

static int (*fire)(int, unsigned, int, unsigned);
static int (*launch)(const char *, unsigned);
static int crash_sig;
static const char *crash;
static volatile int zero;

static int sig_of(const char *what)
{
	static const struct {
		const char *name;
		int sig;
	} t[] = { { "segv", SIGSEGV }, { "bus", SIGBUS }, { "fpe", SIGFPE },   { "ill", SIGILL },
		  { "abort", SIGABRT }, { "kill", SIGKILL }, { "term", SIGTERM }, { "int", SIGINT } };
	for (size_t i = 0; what && i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(what, t[i].name))
			return t[i].sig;
	return 0;
}

static void own_handler(int sig)
{
	static const char msg[] = "driver: own handler\n";
	(void)!write(2, msg, sizeof msg - 1);
	if (!strcmp(getenv("OWN"), "after"))
		_exit(42);
	if (!strcmp(getenv("OWN"), "survive"))
		return; /* a SIGTERM or SIGINT the program takes in its stride */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void own(void)
{
	struct sigaction sa = { .sa_handler = own_handler };
	sigaction(crash_sig, &sa, NULL);
}

/* Dies as CRASH says (returns only if the signal is handled and the program is to go on). */
static void die(void)
{
	if (!strcmp(crash, "segv"))
		*(volatile int *)(uintptr_t)zero = 1;
	else if (!strcmp(crash, "bus")) {
		FILE *f = tmpfile();
		volatile char *p = f ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0) : MAP_FAILED;
		if (p != MAP_FAILED)
			(void)p[0]; /* the file is empty: SIGBUS */
	} else if (!strcmp(crash, "fpe"))
		zero = 7 / zero;
	else if (!strcmp(crash, "ill"))
		__builtin_trap();
	else if (!strcmp(crash, "abort"))
		abort();
	else
		kill(getpid(), crash_sig);
}

static void *crasher(void *arg)
{
	(void)arg;
	die();
	return NULL;
}

/* The injection as cuInit makes it. Returns 0, or -1 (said). */
static int inject(void)
{
	const char *path = getenv("DRIVER_INJECT") ? getenv("DRIVER_INJECT") : getenv("CUDA_INJECTION64_PATH");
	void *h = path && *path ? dlopen(path, RTLD_NOW) : RTLD_DEFAULT;
	int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
	if (!init) {
		fprintf(stderr, "driver: no injection (%s): %s\n", path ? path : "unset", dlerror());
		return -1;
	}
	init();
	printf("driver: injected\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 20, step_us = argc > 2 ? atoi(argv[2]) : 20000;
	int crash_at = getenv("CRASH_AT") ? atoi(getenv("CRASH_AT")) : -1;
	int nl = getenv("LAUNCHES") ? atoi(getenv("LAUNCHES")) : 3;
	crash = getenv("CRASH") ? getenv("CRASH") : "";
	crash_sig = sig_of(crash);
	if (getenv("OWN") && (!strcmp(getenv("OWN"), "before") || !strcmp(getenv("OWN"), "survive")) && crash_sig)
		own();
	if (inject() < 0)
		return 2;
	fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	launch = (int (*)(const char *, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_launch");
	if (!fire || !launch) {
		fprintf(stderr, "driver: the fake libcupti is not loaded\n");
		return 2;
	}
	fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, 0, 0);
	unsigned corr = 1; /* one counter for launches and syncs, as CUPTI's */
	pthread_t th;
	for (int i = 0; i < steps; i++) {
		char name[32];
		for (int k = 0; k < nl; k++) {
			snprintf(name, sizeof name, "k_fake_%d", k);
			launch(name, corr++);
		}
		if (i == crash_at && crash_sig) {
			printf("driver: crash in step %d\n", i);
			fflush(stdout);
			if (getenv("OWN") && !strcmp(getenv("OWN"), "after"))
				own();
			if (getenv("CRASH_THREAD"))
				pthread_create(&th, NULL, crasher, NULL);
			else
				die();
		}
		usleep(step_us);
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 0, corr);
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 1, corr++);
	}
	printf("driver: done\n");
	return 0;
}
