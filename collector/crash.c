/* SPDX-License-Identifier: MIT */
/* crash.c - a program that dies by a fatal signal keeps the window it was recording: the handler asks the
 * writer to write the rings, waits a bounded time, then hands the signal on exactly as it came
 * (docs/ARCHITECTURE.md). Async-signal-safe; never takes a lock. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "collector/out/writer.h"
#include "collector.h"
#include "internal.h"

#define SP_CRASH_WAIT_MS 2000 /* the longest a dying process waits for the writer thread */

static const int crash_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT };
#define NSIGS (sizeof crash_sigs / sizeof crash_sigs[0])

static struct {
	struct sigaction prev[NSIGS]; /* what each signal did before stepprof's handler */
	_Atomic int installed;        /* sp_crash_install ran */
} crash;

/* Writes a, the number n (if >= 0) and b to stderr with one write(2). Async-signal-safe. */
static void say(const char *a, int n, const char *b)
{
	char line[256], num[16];
	size_t k = 0, d = 0;
	for (unsigned v = n < 0 ? 0 : (unsigned)n; n >= 0 && (d == 0 || v); v /= 10)
		num[d++] = (char)('0' + v % 10);
	for (const char *p = "stepprof: "; *p && k < sizeof line; p++)
		line[k++] = *p;
	for (; *a && k < sizeof line; a++)
		line[k++] = *a;
	while (d && k < sizeof line)
		line[k++] = num[--d];
	for (; *b && k < sizeof line - 1; b++)
		line[k++] = *b;
	line[k++] = '\n';
	(void)!write(2, line, k);
}

/* Sends sig to this thread again, with its original siginfo where the kernel takes it back (a
 * fault's address, a sender's pid). Async-signal-safe. */
static void resend(int sig, siginfo_t *si)
{
	pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);
	if (!si || syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si) < 0)
		syscall(SYS_tgkill, pid, tid, sig);
}

static int slot_of(int sig)
{
	for (unsigned i = 0; i < NSIGS; i++)
		if (crash_sigs[i] == sig)
			return (int)i;
	return -1;
}

/* Hands sig on as if stepprof's handler had not been there: the program's earlier action is restored and
 * the signal re-sent, or run here when reached through a later handler that chained. Async-signal-safe. */
static void hand_on(int sig, siginfo_t *si, void *uc, const struct sigaction *prev, int installed)
{
	int dfl = !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_DFL;
	int ign = !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_IGN;
	if (installed || dfl) { /* (reached through another's handler: it chained to die) */
		sigaction(sig, prev, NULL);
		if (!ign)
			resend(sig, si);
	} else if (prev->sa_flags & SA_SIGINFO) {
		prev->sa_sigaction(sig, si, uc);
	} else if (!ign) {
		prev->sa_handler(sig);
	}
}

/* The handler: the rings written once (later signals only wait for it), then the signal handed on. */
static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, k = slot_of(sig);
	struct sigaction cur;
	if (k < 0)
		return;
	const struct sigaction *prev = &crash.prev[k];
	int installed = sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fatal;
	int dies = installed && !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_DFL;
	int how = (dies ? SP_RESCUE_FINAL : 0) | (sig == SIGTERM || sig == SIGINT ? SP_RESCUE_GPU : 0);
	if (sp_writer_rescue(how, SP_CRASH_WAIT_MS) < 0)
		say("signal ", sig, ": the trace writer did not answer in time; the open window's last records are lost");
	hand_on(sig, si, uc, prev, installed);
	errno = saved;
}

/* A dying process's last GPU records: every buffer, incomplete records left out (activity.c). */
static void flush_forced(void)
{
	sp_act_flush(true);
}

void sp_crash_install(void)
{
	if (atomic_exchange(&crash.installed, 1))
		return;
	sp_writer_set_rescue(flush_forced); /* a SIGTERM or SIGINT fetches the GPU records too */
	for (unsigned i = 0; i < NSIGS; i++) {
		struct sigaction sa = { .sa_sigaction = on_fatal }, *prev = &crash.prev[i];
		if (sigaction(crash_sigs[i], NULL, prev) < 0)
			continue;
		sigfillset(&sa.sa_mask); /* nothing else runs on this thread meanwhile */
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (prev->sa_flags & SA_RESTART);
		/* swapped in one call: a handler the program installs meanwhile is kept in prev */
		if (sigaction(crash_sigs[i], &sa, prev) == 0 && !(prev->sa_flags & SA_SIGINFO) &&
		    prev->sa_handler == SIG_IGN)
			sigaction(crash_sigs[i], prev, NULL); /* ignored by the program: nothing ends it */
	}
}
