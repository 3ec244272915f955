/* SPDX-License-Identifier: MIT */
/* run.c - the run id of run.h, from the launcher's environment and /proc, and how this process's
 * files are named (pid, and a tag inside a pid namespace). Prints nothing, never fails (a /proc it
 * can't read falls back to the current time, or to a tag). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "run.h"

/* The environment variable name, or NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* When process pid started (wall clock, seconds), from /proc/PID/stat and the boot time in
 * /proc/stat; the current time if either is unreadable. Can't fail. */
static time_t start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ticks = 0, btime = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t n;

	if (pid == getpid()) /* right in a pid namespace without its own /proc too */
		snprintf(path, sizeof path, "/proc/self/stat");
	else
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return time(NULL);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* the command name may hold spaces and ')': fields count from the last ')' */
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &ticks) != 1)
		return time(NULL);
	if (!(f = fopen("/proc/stat", "re")))
		return time(NULL);
	while (fgets(buf, sizeof buf, f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime && hz > 0 ? (time_t)(btime + ticks / (unsigned long long)hz) : time(NULL);
}

/* "YYYYMMDD-HHMMSS" (local time) of t into buf. Can't fail. */
static void stamp(char *buf, size_t len, time_t t)
{
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%Y%m%d-%H%M%S", &tm);
}

void sp_run_id(char *out, size_t len, const char **how)
{
	const char *v, *src;
	char when[32], host[64] = "host";

	if ((v = env(SP_RUN_ENV))) {
		snprintf(out, len, "%s", v);
		src = "$" SP_RUN_ENV;
	} else if ((v = env("SLURM_JOB_ID"))) {
		const char *step = env("SLURM_STEP_ID");
		snprintf(out, len, "slurm-%s%s%s", v, step ? "." : "", step ? step : "");
		src = "Slurm job id";
	} else if ((v = env("TORCHELASTIC_RUN_ID")) && strcmp(v, "none")) {
		snprintf(out, len, "torchrun-%s", v);
		src = "torchrun rendezvous id";
	} else if ((v = env("PMIX_NAMESPACE")) || (v = env("OMPI_MCA_ess_base_jobid"))) {
		snprintf(out, len, "mpi-%s", v);
		src = "MPI job namespace";
	} else if (env("TORCHELASTIC_RUN_ID") || env("TORCHELASTIC_RESTART_COUNT") || env("PMI_RANK") ||
		   env("MV2_COMM_WORLD_RANK")) {
		pid_t pp = getppid();
		stamp(when, sizeof when, start_time(pp));
		gethostname(host, sizeof host - 1);
		snprintf(out, len, "%s-%s-%d", when, host, (int)pp);
		src = "launcher start time, host and pid";
	} else {
		stamp(when, sizeof when, start_time(getpid()));
		snprintf(out, len, "%s-%d", when, (int)getpid());
		src = "process start time and pid";
	}
	for (char *p = out; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '-' || *p == '_'))
			*p = '_';
	if (out[0] == '.') /* never ".", ".." or a hidden folder */
		out[0] = '_';
	if (how)
		*how = src;
}

unsigned long long sp_pidns(void)
{
	char link[64];
	unsigned long long ino = 0;
	ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	return sscanf(link, "pid:[%llu]", &ino) == 1 ? ino : 0;
}

int sp_name_pid(char *tag, size_t len)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char made[16];
	static pid_t made_for; /* a fork child draws its own */
	const char *forced = getenv(SP_NAME_PID_ENV);
	int pid = forced && atoi(forced) > 0 ? atoi(forced) : (int)getpid();
	pthread_mutex_lock(&lock);
	if (made_for != getpid()) {
		uint32_t r = 0;
		made[0] = 0;
		made_for = getpid();
		if (forced || sp_pidns() != SP_PIDNS_INIT) {
			if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) {
				struct timespec ts;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				r = (uint32_t)(ts.tv_nsec ^ ((uint64_t)(uintptr_t)&ts >> 4) ^ ((uint64_t)getpid() << 16));
			}
			snprintf(made, sizeof made, ".%08x", r);
		}
	}
	snprintf(tag, len, "%s", made);
	pthread_mutex_unlock(&lock);
	return pid;
}
