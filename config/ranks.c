/* SPDX-License-Identifier: MIT */
/* ranks.c - which rank this process is, from the launcher's environment variables, and the
 * [ranks] set ("all", "0,1", "0-3,8") that selects the processes to profile. Reads only the
 * envp it is given; never prints, never allocates. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "ranks.h"

/* One launcher's variables. A launcher without a size (or local rank) variable of its own
 * takes the first valid one of any launcher in table order. */
struct launcher {
	const char *source;
	const char *rank, *size;        /* size may be NULL */
	const char *local[2];           /* local rank candidates, NULL-terminated */
};

static const struct launcher launchers[] = {
	{ "explicit", "STEPPROF_RANK", NULL, { NULL } },
	{ "torchrun", "RANK", "WORLD_SIZE", { "LOCAL_RANK" } },
	{ "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", { "OMPI_COMM_WORLD_LOCAL_RANK" } },
	{ "pmix", "PMIX_RANK", NULL, { NULL } },
	{ "mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", { "MV2_COMM_WORLD_LOCAL_RANK" } },
	{ "mpich", "PMI_RANK", "PMI_SIZE", { "MPI_LOCALRANKID", "PMI_LOCAL_RANK" } },
	{ "slurm", "SLURM_PROCID", "SLURM_NTASKS", { "SLURM_LOCALID" } },
};
#define NLAUNCHERS (sizeof(launchers) / sizeof(launchers[0]))

/* Value of name in envp, or NULL. */
static const char *env_get(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* Parses a decimal integer in min..INT_MAX with nothing around it. Returns it, or -1 if s is
 * NULL, malformed or out of range. */
static int parse_int(const char *s, int min)
{
	char *end;
	long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	v = strtol(s, &end, 10);
	return *end || v < min || v > INT_MAX ? -1 : (int)v;
}

/* The value of var in envp (min..INT_MAX), or -1 if unset or malformed; a malformed one is
 * described in ri->problem unless an earlier one is. */
static int env_int(struct sp_rank_info *ri, char **envp, const char *var, int min)
{
	const char *s = var ? env_get(envp, var) : NULL;
	int v = parse_int(s, min);
	if (s && v < 0 && !ri->problem[0]) {
		snprintf(ri->problem, sizeof(ri->problem), "%s='%.64s' is not a %s (a whole number >= %d); ignored",
			 var, s, min ? "size" : "rank", min);
		ri->explicit_bad = !strncmp(var, "STEPPROF_", 9);
	}
	return v;
}

/* This function can't fail. */
void sp_ranks_detect(struct sp_rank_info *ri, char **envp)
{
	extern char **environ;
	const struct launcher *l = NULL;

	if (!envp)
		envp = environ;
	*ri = (struct sp_rank_info){ .rank = -1, .world_size = -1, .local_rank = -1, .source = "none" };
	ri->problem[0] = '\0';
	for (size_t i = 0; i < NLAUNCHERS && !l; i++)
		if ((ri->rank = env_int(ri, envp, launchers[i].rank, 0)) >= 0)
			l = &launchers[i];
	if (l) {
		ri->source = l->source;
		ri->world_size = env_int(ri, envp, l->size, 1);
		for (size_t i = 0; l->size == NULL && i < NLAUNCHERS && ri->world_size < 0; i++)
			ri->world_size = env_int(ri, envp, launchers[i].size, 1);
		for (size_t j = 0; j < 2 && l->local[j] && ri->local_rank < 0; j++)
			ri->local_rank = env_int(ri, envp, l->local[j], 0);
		for (size_t i = 0; l->local[0] == NULL && i < NLAUNCHERS; i++)
			for (size_t j = 0; j < 2 && launchers[i].local[j] && ri->local_rank < 0; j++)
				ri->local_rank = env_int(ri, envp, launchers[i].local[j], 0);
	}
	int n = env_int(ri, envp, "STEPPROF_WORLD_SIZE", 1);
	if (n > 0)
		ri->world_size = n;
}

/* Reads one rank number at *p (blanks around it skipped), advancing *p. Returns it, or -1. */
static int read_rank(const char **p)
{
	long v;
	char *end;

	while (isblank((unsigned char)**p))
		(*p)++;
	if (!isdigit((unsigned char)**p))
		return -1;
	v = strtol(*p, &end, 10);
	for (*p = end; isblank((unsigned char)**p);)
		(*p)++;
	return v > INT_MAX ? -1 : (int)v;
}

/* Parses one token "N" or "LO-HI" into set. Returns 0, or -1 with a message naming it. */
static int parse_token(const char *tok, size_t len, struct sp_rankset *set, char *err, size_t errlen)
{
	char buf[32];
	const char *q = buf;
	int lo, hi;

	if (len >= sizeof(buf))
		len = sizeof(buf) - 1; /* a valid token is shorter: the tail only fails the parse */
	memcpy(buf, tok, len);
	buf[len] = '\0';
	lo = hi = read_rank(&q);
	if (lo >= 0 && *q == '-') {
		q++;
		hi = read_rank(&q);
	}
	if (lo < 0 || hi < 0 || *q) {
		snprintf(err, errlen, "bad rank or range '%.*s'", (int)len, tok);
		return -1;
	}
	if (hi < lo) {
		snprintf(err, errlen, "bad range '%.*s': %d > %d", (int)len, tok, lo, hi);
		return -1;
	}
	if (set->n == SP_RANKSET_MAX) {
		snprintf(err, errlen, "more than %d ranks or ranges at '%.*s'", SP_RANKSET_MAX, (int)len, tok);
		return -1;
	}
	set->r[set->n].lo = lo;
	set->r[set->n++].hi = hi;
	return 0;
}

/* Returns 0, or -1 with a message naming the bad token in err; set is cleared first. */
int sp_rankset_parse(const char *s, struct sp_rankset *set, char *err, size_t errlen)
{
	const char *end = s + strlen(s);

	memset(set, 0, sizeof(*set));
	while (isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	if (end - s == 3 && !strncasecmp(s, "all", 3)) {
		set->all = true;
		return 0;
	}
	if (end == s) {
		snprintf(err, errlen, "empty rank set");
		return -1;
	}
	for (const char *tok = s;;) {
		const char *comma = memchr(tok, ',', (size_t)(end - tok));
		if (parse_token(tok, (size_t)((comma ? comma : end) - tok), set, err, errlen) < 0)
			return -1;
		if (!comma)
			return 0;
		tok = comma + 1;
	}
}

/* This function can't fail. */
bool sp_rankset_has(const struct sp_rankset *set, int rank)
{
	if (set->all)
		return true;
	if (rank < 0)
		rank = 0;
	for (int i = 0; i < set->n; i++)
		if (rank >= set->r[i].lo && rank <= set->r[i].hi)
			return true;
	return false;
}
