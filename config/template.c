/* SPDX-License-Identifier: MIT */
/* template.c - output path templates: the {host} {pid} {rank} {date} {time} {jobid} {run}
 * placeholders, checked when the configuration is read and expanded when the trace file is
 * named. Runs inside the profiled process: never prints, never exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "config.h"
#include "config_impl.h"
#include "run.h"

enum { PH_HOST, PH_PID, PH_RANK, PH_DATE, PH_TIME, PH_JOBID, PH_RUN };
static const char *const placeholders[] = { "host", "pid", "rank", "date", "time", "jobid", "run" };
#define NPLACEHOLDERS (sizeof(placeholders) / sizeof(placeholders[0]))

/* The PH_ index of the placeholder that the '{' at p starts (*len: its length with braces),
 * or -1 if none does. */
static int placeholder_at(const char *p, size_t *len)
{
	const char *close = strchr(p, '}');

	for (size_t i = 0; close && i < NPLACEHOLDERS; i++) {
		if ((size_t)(close - p - 1) == strlen(placeholders[i]) &&
		    !strncmp(p + 1, placeholders[i], strlen(placeholders[i]))) {
			*len = (size_t)(close - p + 1);
			return (int)i;
		}
	}
	return -1;
}

int sp_cfg_check_template(const char *t, char *problem, size_t len)
{
	size_t n;

	for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
		if (placeholder_at(p, &n) < 0) {
			const char *close = strchr(p, '}');
			if (close)
				snprintf(problem, len, "unknown placeholder '%.*s'", (int)(close - p + 1), p);
			else
				snprintf(problem, len, "'{' without '}' in '%s'", t);
			return -1;
		}
	}
	return 0;
}

/* Copies s into out at *n, '/' replaced by '_'. Returns -1 if it does not fit. */
static int put(char *out, size_t outlen, size_t *n, const char *s)
{
	for (; *s; s++) {
		if (*n + 1 >= outlen)
			return -1;
		out[(*n)++] = *s == '/' ? '_' : *s;
	}
	out[*n] = '\0';
	return 0;
}

/* Returns 0, or -1 (out holds a truncated string) if it does not fit or names an unknown
 * placeholder. ri may be NULL (no rank). */
int sp_cfg_expand(const char *tmpl, const struct sp_rank_info *ri, char *out, size_t outlen)
{
	char val[256];
	size_t n = 0, len;
	time_t now = time(NULL);
	struct tm tm;
	const char *job;

	if (!outlen)
		return -1;
	out[0] = '\0';
	localtime_r(&now, &tm);
	for (const char *p = tmpl; *p; p++) {
		if (*p != '{') {
			if (n + 1 >= outlen)
				return -1;
			out[n++] = *p;
			out[n] = '\0';
			continue;
		}
		switch (placeholder_at(p, &len)) {
		case PH_HOST:
			if (gethostname(val, sizeof(val)) < 0)
				strcpy(val, "nohost");
			val[sizeof(val) - 1] = '\0';
			break;
		case PH_PID:
			snprintf(val, sizeof(val), "%d", (int)getpid());
			break;
		case PH_RANK:
			if (ri && ri->rank >= 0)
				snprintf(val, sizeof(val), "%d", ri->rank);
			else
				strcpy(val, "norank");
			break;
		case PH_DATE:
			strftime(val, sizeof(val), "%Y%m%d", &tm);
			break;
		case PH_TIME:
			strftime(val, sizeof(val), "%H%M%S", &tm);
			break;
		case PH_JOBID:
			if (!(job = getenv("SLURM_JOB_ID")) || !*job)
				if (!(job = getenv("PBS_JOBID")) || !*job)
					if (!(job = getenv("TORCHELASTIC_RUN_ID")) || !*job)
						job = "nojob";
			snprintf(val, sizeof(val), "%s", job);
			break;
		case PH_RUN:
			sp_run_id(val, sizeof(val), NULL);
			break;
		default:
			return -1;
		}
		if (put(out, outlen, &n, val) < 0)
			return -1;
		p += len - 1;
	}
	return 0;
}
