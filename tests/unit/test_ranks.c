/* SPDX-License-Identifier: MIT */
/* test_ranks.c - config/ranks.c: rank detection for every launcher (torchrun, Open MPI, PMIx,
 * MVAPICH, MPICH / Intel MPI / Cray PMI, Slurm, explicit, none), precedence, malformed values,
 * and rank-set parsing and selection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include "config/ranks.h"

/* Detects from envp and checks all four fields. */
static void expect_rank(char **envp, int rank, int size, int local, const char *source)
{
	struct sp_rank_info ri;

	sp_ranks_detect(&ri, envp);
	if (ri.rank != rank || ri.world_size != size || ri.local_rank != local || strcmp(ri.source, source))
		fail_msg("got rank %d size %d local %d source %s; want %d %d %d %s (first var %s)", ri.rank,
			 ri.world_size, ri.local_rank, ri.source, rank, size, local, source, envp[0] ? envp[0] : "-");
}

static void test_launchers(void **state)
{
	(void)state;
	char *torchrun[] = { "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", NULL };
	char *ompi[] = { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL };
	char *pmix[] = { "PMIX_RANK=6", "PMIX_NAMESPACE=x", NULL };
	char *pmix_srun[] = { "PMIX_RANK=6", "SLURM_PROCID=6", "SLURM_NTASKS=16", "SLURM_LOCALID=2", NULL };
	char *mv2[] = { "MV2_COMM_WORLD_RANK=2", "MV2_COMM_WORLD_SIZE=3", "MV2_COMM_WORLD_LOCAL_RANK=0", NULL };
	char *hydra[] = { "PMI_RANK=9", "PMI_SIZE=12", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=4", NULL };
	char *cray[] = { "PMI_RANK=9", "PMI_SIZE=12", "PMI_LOCAL_RANK=3", NULL };
	char *slurm[] = { "SLURM_PROCID=7", "SLURM_NTASKS=8", "SLURM_LOCALID=3", "SLURM_JOB_ID=1", NULL };
	char *none[] = { "PATH=/bin", "HOME=/root", NULL };
	char *empty[] = { NULL };

	expect_rank(torchrun, 5, 8, 1, "torchrun");
	expect_rank(ompi, 3, 4, 1, "openmpi");
	expect_rank(pmix, 6, -1, -1, "pmix");              /* PMIx has no size variable */
	expect_rank(pmix_srun, 6, 16, 2, "pmix");          /* ... unless another launcher's gives it */
	expect_rank(mv2, 2, 3, 0, "mvapich");
	expect_rank(hydra, 9, 12, 1, "mpich");
	expect_rank(cray, 9, 12, 3, "mpich");
	expect_rank(slurm, 7, 8, 3, "slurm");
	expect_rank(none, -1, -1, -1, "none");
	expect_rank(empty, -1, -1, -1, "none");
}

static void test_precedence_and_overrides(void **state)
{
	(void)state;
	/* torchrun under Slurm: torchrun's variables describe the worker */
	char *torch_in_slurm[] = {
		"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "RANK=11", "WORLD_SIZE=16", "LOCAL_RANK=3", NULL
	};
	/* Open MPI 5 sets PMIX_RANK too: Open MPI comes first and has a size */
	char *ompi5[] = { "PMIX_RANK=1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
			  "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL };
	/* STEPPROF_RANK wins; size and local rank still come from the environment */
	char *explicit[] = { "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "STEPPROF_RANK=2", NULL };
	char *explicit_size[] = { "STEPPROF_RANK=2", "STEPPROF_WORLD_SIZE=4", "RANK=5", "WORLD_SIZE=8", NULL };
	char *explicit_alone[] = { "STEPPROF_RANK=0", NULL };
	char *size_only[] = { "STEPPROF_WORLD_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL };
	char *size_no_rank[] = { "STEPPROF_WORLD_SIZE=4", NULL };

	expect_rank(torch_in_slurm, 11, 16, 3, "torchrun");
	expect_rank(ompi5, 1, 2, 1, "openmpi");
	expect_rank(explicit, 2, 8, 1, "explicit");
	expect_rank(explicit_size, 2, 4, -1, "explicit");
	expect_rank(explicit_alone, 0, -1, -1, "explicit");
	expect_rank(size_only, 1, 4, -1, "slurm");
	expect_rank(size_no_rank, -1, 4, -1, "none");
}

/* Malformed values are treated as absent: the next launcher is tried. */
static void test_malformed(void **state)
{
	(void)state;
	char *bad_rank[] = { "RANK=abc", "WORLD_SIZE=8", "SLURM_PROCID=2", "SLURM_NTASKS=4", NULL };
	char *neg[] = { "RANK=-1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", NULL };
	char *junk[] = { "RANK=1x", "RANK2=3", "PMI_RANK= 4", "PMI_RANK2=1", NULL };
	char *empty_val[] = { "RANK=", "LOCAL_RANK=0", NULL };
	char *huge[] = { "RANK=99999999999", NULL };
	char *bad_size[] = { "RANK=1", "WORLD_SIZE=0", "LOCAL_RANK=z", NULL };
	char *bad_explicit[] = { "STEPPROF_RANK=one", "STEPPROF_WORLD_SIZE=-2", "RANK=1", "WORLD_SIZE=2", NULL };
	char *prefix[] = { "SLURM_PROCID_X=1", "XRANK=1", NULL };

	expect_rank(bad_rank, 2, 4, -1, "slurm");
	expect_rank(neg, 1, 2, -1, "openmpi");
	expect_rank(junk, -1, -1, -1, "none");
	expect_rank(empty_val, -1, -1, -1, "none");
	expect_rank(huge, -1, -1, -1, "none");
	expect_rank(bad_size, 1, -1, -1, "torchrun");
	expect_rank(bad_explicit, 1, 2, -1, "torchrun");
	expect_rank(prefix, -1, -1, -1, "none");

	/* a malformed variable is described (callers report it), never silently skipped */
	struct sp_rank_info ri;
	sp_ranks_detect(&ri, bad_explicit);
	assert_string_equal(ri.problem, "STEPPROF_RANK='one' is not a rank (a whole number >= 0); ignored");
	assert_true(ri.explicit_bad);
	sp_ranks_detect(&ri, bad_rank);
	assert_string_equal(ri.problem, "RANK='abc' is not a rank (a whole number >= 0); ignored");
	assert_false(ri.explicit_bad);
	sp_ranks_detect(&ri, prefix);
	assert_string_equal(ri.problem, "");
	char *bad_size_explicit[] = { "RANK=1", "STEPPROF_WORLD_SIZE=0", NULL };
	sp_ranks_detect(&ri, bad_size_explicit);
	assert_string_equal(ri.problem, "STEPPROF_WORLD_SIZE='0' is not a size (a whole number >= 1); ignored");
	assert_true(ri.explicit_bad);
}

static void test_rankset_parse(void **state)
{
	(void)state;
	struct sp_rankset set;
	char err[128];
	static const struct {
		const char *s;
		int n, lo0, hi0;
	} ok[] = {
		{ "0", 1, 0, 0 },
		{ "0,1", 2, 0, 0 },
		{ "0-3,8", 2, 0, 3 },
		{ " 2 - 5 , 7 ", 2, 2, 5 },
		{ "\t4\t", 1, 4, 4 },
		{ "3-3", 1, 3, 3 },
		{ "2147483647", 1, 2147483647, 2147483647 },
	};
	static const struct {
		const char *s, *err;
	} bad[] = {
		{ "", "empty rank set" },
		{ "   ", "empty rank set" },
		{ "x", "bad rank or range 'x'" },
		{ "0,x", "bad rank or range 'x'" },
		{ "0-3,8-", "bad rank or range '8-'" },
		{ "1,,2", "bad rank or range ''" },
		{ "0,", "bad rank or range ''" },
		{ "-1", "bad rank or range '-1'" },
		{ "1 2", "bad rank or range '1 2'" },
		{ "1-2-3", "bad rank or range '1-2-3'" },
		{ "5-2", "bad range '5-2': 5 > 2" },
		{ "2147483648", "bad rank or range '2147483648'" },
		{ "alll", "bad rank or range 'alll'" },
		{ "all,1", "bad rank or range 'all'" },
		{ "0-3, x8 ,9", "bad rank or range ' x8 '" },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (sp_rankset_parse(ok[i].s, &set, err, sizeof(err)) != 0)
			fail_msg("'%s': %s", ok[i].s, err);
		assert_false(set.all);
		assert_int_equal(set.n, ok[i].n);
		assert_int_equal(set.r[0].lo, ok[i].lo0);
		assert_int_equal(set.r[0].hi, ok[i].hi0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sp_rankset_parse(bad[i].s, &set, err, sizeof(err)), -1);
		assert_string_equal(err, bad[i].err);
	}
	assert_int_equal(sp_rankset_parse(" ALL ", &set, err, sizeof(err)), 0);
	assert_true(set.all);
	/* at most SP_RANKSET_MAX ranges */
	char many[512] = "";
	for (int i = 0; i < SP_RANKSET_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i ? "," : "", 2 * i);
	assert_int_equal(sp_rankset_parse(many, &set, err, sizeof(err)), 0);
	assert_int_equal(set.n, SP_RANKSET_MAX);
	strcat(many, ",999");
	assert_int_equal(sp_rankset_parse(many, &set, err, sizeof(err)), -1);
	assert_string_equal(err, "more than 64 ranks or ranges at '999'");
}

static void test_rankset_has(void **state)
{
	(void)state;
	struct sp_rankset set;
	char err[128];

	assert_int_equal(sp_rankset_parse("0-3,8", &set, err, sizeof(err)), 0);
	for (int r = 0; r < 12; r++)
		assert_int_equal(sp_rankset_has(&set, r), r <= 3 || r == 8);
	assert_true(sp_rankset_has(&set, -1)); /* no rank: rank 0 of a one-process job */
	assert_int_equal(sp_rankset_parse("1,5", &set, err, sizeof(err)), 0);
	assert_false(sp_rankset_has(&set, -1));
	assert_false(sp_rankset_has(&set, 0));
	assert_true(sp_rankset_has(&set, 5));
	assert_int_equal(sp_rankset_parse("all", &set, err, sizeof(err)), 0);
	assert_true(sp_rankset_has(&set, -1));
	assert_true(sp_rankset_has(&set, 1000000));
	/* detection plus selection, as the library does it */
	char *env[] = { "OMPI_COMM_WORLD_RANK=8", "OMPI_COMM_WORLD_SIZE=16", NULL };
	struct sp_rank_info ri;
	sp_ranks_detect(&ri, env);
	assert_int_equal(sp_rankset_parse("0-3, 8", &set, err, sizeof(err)), 0);
	assert_true(sp_rankset_has(&set, ri.rank));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_launchers),   cmocka_unit_test(test_precedence_and_overrides),
		cmocka_unit_test(test_malformed),   cmocka_unit_test(test_rankset_parse),
		cmocka_unit_test(test_rankset_has),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
