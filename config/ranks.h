/* SPDX-License-Identifier: MIT */
/* ranks.h - who this process is in a parallel job (from the launcher's environment) and
 * whether the configured rank set selects it. */
#ifndef SP_RANKS_H
#define SP_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sp_rank_info {
	int rank;               /* global rank, -1 if the environment gives none */
	int world_size;         /* -1 if unknown */
	int local_rank;         /* -1 if unknown */
	const char *source;     /* which launcher's variables were used: "torchrun", "slurm", ... or "none" */
	bool explicit_bad;      /* STEPPROF_RANK or STEPPROF_WORLD_SIZE is set but malformed */
	char problem[256];      /* "" or the first rank variable that is set but malformed (never ignored:
				   callers report it once, "stepprof: " + problem) */
};

/* Reads rank variables from envp (NULL = environ) in this order: STEPPROF_RANK (explicit),
 * torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_*), PMIx (PMIX_RANK),
 * MVAPICH (MV2_COMM_WORLD_*), MPICH/PMI (PMI_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID). A variable that is set but not a number in range is skipped, as if unset, and
 * the first such one is described in ri->problem. This function can't fail. */
void sp_ranks_detect(struct sp_rank_info *ri, char **envp);

#define SP_RANKSET_MAX 64
struct sp_rankset {
	bool all;
	int n;    /* ranges used */
	struct {
		int lo, hi;
	} r[SP_RANKSET_MAX];
};

/* Parses "all", "0", "0,1", "0-3,8". Returns 0, or -1 with a message in err. */
int sp_rankset_parse(const char *s, struct sp_rankset *set, char *err, size_t errlen);
/* Whether rank is selected. A process with no rank (-1) counts as rank 0 of a one-process
 * job: selected by "all" or by a set holding 0. This function can't fail. */
bool sp_rankset_has(const struct sp_rankset *set, int rank);

#endif
