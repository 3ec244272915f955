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

/* Copies s into out at *n. Returns -1 if it does not fit. */
static int put(char *out, size_t outlen, size_t *n, const char *s)
{
	for (; *s; s++) {
		if (*n + 1 >= outlen)
			return -1;
		out[(*n)++] = *s;
	}
	out[*n] = '\0';
	return 0;
}

/* Makes a placeholder's value (from the environment or the host name: anything) one safe path
 * component: '/' and control characters become '_', a leading '.' too (never ".", ".." or a hidden
 * folder), an empty value "_". Returns 1 if it changed val, else 0. */
static int make_safe(char *val)
{
	int changed = 0;
	for (char *p = val; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f) {
			*p = '_';
			changed = 1;
		}
	if (!val[0])
		val[1] = '\0';
	if (!val[0] || val[0] == '.') {
		val[0] = '_';
		changed = 1;
	}
	return changed;
}

/* Says in note (notelen bytes; none if 0) that placeholder name's value, from source, was changed
 * from was (printable bytes only) to now. This function can't fail. */
static void say_changed(char *note, size_t notelen, const char *name, const char *source, const char *was,
			const char *now)
{
	char shown[64];
	size_t k = 0;
	for (const char *p = was; *p && k + 1 < sizeof shown; p++)
		shown[k++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
	shown[k] = 0;
	if (notelen && !note[0])
		snprintf(note, notelen,
			 "output: {%s} is '%s' (from %s), not a safe folder name: written as '%s' (a placeholder's value never "
			 "leaves the configured directory)",
			 name, shown, source, now);
}

/* Returns 0, or -1 (out holds a truncated string) if it does not fit or names an unknown
 * placeholder. ri may be NULL (no rank). */
int sp_cfg_expand(const char *tmpl, const struct sp_rank_info *ri, char *out, size_t outlen)
{
	return sp_cfg_expand_note(tmpl, ri, out, outlen, NULL, 0);
}

/* As sp_cfg_expand; note (if notelen) is "" or says which placeholder's value was made safe. */
int sp_cfg_expand_note(const char *tmpl, const struct sp_rank_info *ri, char *out, size_t outlen, char *note,
		       size_t notelen)
{
	char val[256], was[256];
	size_t n = 0, len;
	time_t now = time(NULL);
	struct tm tm;
	const char *job = NULL, *source = NULL;

	if (notelen)
		note[0] = '\0';
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
		int ph = placeholder_at(p, &len);
		switch (ph) {
		case PH_HOST:
			if (gethostname(val, sizeof(val)) < 0)
				strcpy(val, "nohost");
			val[sizeof(val) - 1] = '\0';
			source = "the host name";
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
			source = "SLURM_JOB_ID";
			if (!(job = getenv(source)) || !*job)
				if (!(job = getenv(source = "PBS_JOBID")) || !*job)
					if (!(job = getenv(source = "TORCHELASTIC_RUN_ID")) || !*job)
						job = "nojob";
			snprintf(val, sizeof(val), "%s", job);
			break;
		case PH_RUN:
			sp_run_id(val, sizeof(val), NULL);
			break;
		default:
			return -1;
		}
		snprintf(was, sizeof was, "%s", val);
		if (make_safe(val))
			say_changed(note, notelen, placeholders[ph], source ? source : "?", was, val);
		source = NULL;
		if (put(out, outlen, &n, val) < 0)
			return -1;
		p += len - 1;
	}
	return 0;
}
