/* SPDX-License-Identifier: MIT */
/* tunables.h - every number that shapes a decision of automatic step detection, in one table:
 * name, default, allowed range, stage, why, and the test that covers it. The library runs the
 * defaults (sp_det_tune_default); `stepprof autostep --set NAME=VALUE` replays a stream with
 * others, so the corpus can sweep them. Pure: no I/O. docs/STEPS.md, "Tunables". */
#ifndef SP_TUNABLES_H
#define SP_TUNABLES_H

#include <stddef.h>
#include <stdint.h>

/* X(name, default, min, max, stage, why, test). Stages: period (period.c: the search and its
 * proof), wrap (wrap.c: where a proven period wraps, blocks), regime (regime.c: regimes and
 * numbering), check (stepcheck.c: the per-step check), say (stepdet_say.c). */
#define SP_DET_TUNABLES(X) \
	X(ring_tokens, 65536, 256, 1u << 24, "period", \
	  "tokens the learner keeps: an iteration must repeat min_repeats + 1 times within them", \
	  "autostep_corpus.sh") \
	X(try_every, 256, 1, 65536, "period", \
	  "tokens between detection attempts once try_mid_tokens were seen (an attempt reads about scan_newest)", \
	  "test_stepdet may_try_is_exact") \
	X(try_early_tokens, 512, 0, 1u << 24, "period", \
	  "below this many tokens attempts come every try_early_gap: a short loop locks within a few iterations", \
	  "test_autostep tiny_kernels_with_sync") \
	X(try_early_gap, 8, 1, 65536, "period", "tokens between attempts while the stream is young", \
	  "test_stepdet may_try_is_exact") \
	X(try_mid_tokens, 4096, 0, 1u << 24, "period", "below this many tokens attempts come every try_mid_gap", \
	  "test_stepdet may_try_is_exact") \
	X(try_mid_gap, 32, 1, 65536, "period", "tokens between attempts up to try_mid_tokens", \
	  "test_stepdet may_try_is_exact") \
	X(graph_try, 64, 1, 65536, "period", \
	  "a graph launch this many tokens after the last attempt runs the next one: a graph loop's copies are short", \
	  "test_stepdet may_try_is_exact; corpus jax_train") \
	X(max_candidates, 64, 1, 4096, "period", "distances tried as periods per attempt, per starting token", \
	  "autostep_corpus.sh") \
	X(scan_newest, 8192, 64, 1u << 24, "period", \
	  "newest tokens searched for the rarest repeating token: old setup tokens must not hide the loop's", \
	  "test_autostep startup_copies_are_not_the_loop") \
	X(scan_windows, 3, 1, 8, "period", \
	  "windows searched for a rare token: the newest half, eighth, 32nd ... of the ring", \
	  "test_autostep transformer_like") \
	X(scan_min, 64, 1, 65536, "period", "tokens each search window holds at least", "autostep_corpus.sh") \
	X(min_repeats, 3, 1, 1024, "period", \
	  "whole periods a run must cover besides the newest before it can prove the period", \
	  "test_autostep tiny_kernels_with_sync") \
	X(max_period, 16384, 2, 1u << 20, "period", "the longest iteration, in tokens", \
	  "test_autostep transformer_like") \
	X(gap_ratio, 4, 1, 1000, "period", \
	  "a wrap's CPU gap (median of three copies) against the period's median gap", \
	  "test_autostep layer_gaps_are_not_the_wrap") \
	X(min_wrap_ns, 20000, 0, 1000000000, "period", "... and at least this long (the loop's Python, data loading)", \
	  "test_autostep sync_ends_iteration_without_gaps") \
	X(nosync_repeats, 8, 1, 1024, "period", \
	  "copies a period that only a CPU gap wraps must show: layers behind Python's overhead repeat fewer times", \
	  "test_autostep layer_gaps_are_not_the_wrap") \
	X(graph_repeats, 8, 1, 1024, "period", "copies a period that only a graph launch wraps must show", \
	  "autostep_corpus.sh graphs_infer, graphs_train") \
	X(long_run, 32768, 1, 1u << 24, "period", "a run this long proves a period without a visible wrap ...", \
	  "test_autostep learn_workload_never_locks") \
	X(long_run_copies, 16, 1, 1024, "period", "... if it also holds this many copies", \
	  "test_autostep learn_workload_never_locks") \
	X(super_copies, 8, 2, 1024, "period", \
	  "a launch period this many times shorter than the longest-running one may be the iteration ...", \
	  "autostep_corpus.sh (a loss read every N iterations)") \
	X(super_fill_pct, 90, 1, 100, "period", \
	  "... if its run fills this share of the longer one: the read is an occasional extra", \
	  "autostep_corpus.sh (a loss read every N iterations)") \
	X(refute_factor, 2, 1, 64, "period", \
	  "a period refuted after its lock must show this many times the copies it showed before", \
	  "test_stepdet phase_change_and_relock") \
	X(attempt_share, 100, 1, 1000000, "period", \
	  "attempts may take 1/attempt_share of the program's first attempt_eager_ns ...", \
	  "test_autostep attempts_keep_to_their_share") \
	X(attempt_late, 400, 1, 1000000, "period", "... and 1/attempt_late of its time after that ...", \
	  "test_autostep attempts_keep_to_their_share") \
	X(attempt_eager_ns, 2000000000, 0, 1000000000000ull, "period", "the program's first time, in ns", \
	  "test_autostep attempts_keep_to_their_share") \
	X(attempt_burst_ns, 1000000, 0, 1000000000000ull, "period", "... plus this many ns: the first cheap attempts", \
	  "test_autostep attempts_keep_to_their_share") \
	X(block_extra, 16, 0, 1024, "wrap", \
	  "a synchronised period that is c >= 2 copies of a block plus at most this many tokens is c iterations", \
	  "test_autostep loss_read_every_few_iterations") \
	X(block_max_copies, 256, 2, 65536, "wrap", "the most blocks tried in one period", \
	  "test_autostep loss_read_every_few_iterations") \
	X(block_min, 32, 1, 65536, "wrap", \
	  "the finest block holds at least this many tokens: many tiny kernels and a sync are one iteration", \
	  "test_autostep tiny_kernels_with_sync") \
	X(block_budget, 4, 1, 1024, "wrap", "token comparisons per token of the period the block search may make", \
	  "test_autostep loss_read_every_few_iterations") \
	X(block_quiet_pct, 50, 0, 100, "wrap", \
	  "a block's wrap stands out when more than this share of its gaps are 1/gap_ratio of it or less", \
	  "test_autostep read_mid_iteration_wraps_at_the_gap") \
	X(defer_steps, 26, 1, 1000000, "regime", \
	  "steps in a row (the learner's included) a regime without training evidence runs before they count", \
	  "test_stepdet eval_first_prefers_training, short_inference_loop_records") \
	X(optim_defer_steps, 65536, 1, 1000000, "regime", \
	  "... instead, while the program has made a torch optimizer that has not stepped (its first step takes over)", \
	  "test_stepdet_py optimizer_made_defers") \
	X(settle_steps, 64, 1, 1000000, "regime", \
	  "a regime this old is the program's loop: the caller may stop watching once the schedule is done", \
	  "test_stepdet auto_lock_watch_and_check") \
	X(train_settle, 4, 1, 1000, "regime", \
	  "a regime without training evidence settles after this many times settle_steps: training may follow", \
	  "test_stepdet auto_lock_watch_and_check") \
	X(young_steps, 8, 1, 1000000, "regime", \
	  "a regime that ends within this many steps was a wrong lock: its period must prove itself longer", \
	  "test_stepdet phase_change_and_relock") \
	X(irregular_steps, 2, 0, 1000000, "check", \
	  "a regime this old keeps its lock through one step with a few launches more", \
	  "test_stepdet irregular_step_kept") \
	X(irregular_extra, 8, 1, 1000000, "check", "... at most 1/irregular_extra of the period's launches more", \
	  "test_stepdet irregular_bounds") \
	X(irregular_gap, 4, 1, 1000000, "check", "... and at most one such step in this many", \
	  "test_stepdet irregular_bounds") \
	X(split_pct, 50, 0, 100, "check", \
	  "an anchor call after this share of the step's launches or more, but not all, is an extra call", \
	  "test_stepdet extra_anchor_call") \
	X(overrun, 2, 1, 1000, "check", \
	  "a counted step with overrun times the period's launches plus overrun_slack has lost its anchor", \
	  "test_stepdet phase_change_and_relock") \
	X(overrun_slack, 32, 0, 1000000, "check", "the slack of overrun", "test_stepdet phase_change_and_relock") \
	X(probe_ratio, 4, 2, 1000, "check", \
	  "an uncounted step this many times longer or shorter than the counted ones gets the next one counted", \
	  "test_stepdet sparse_blind_probe") \
	X(ref_weight, 8, 1, 1024, "check", \
	  "the counted steps' time is a moving average: the newest step weighs 1/ref_weight", \
	  "test_stepdet sparse_blind_probe") \
	X(undecided_tokens, 65536, 1, 1u << 30, "say", "learning this long without a lock is reported (once)", \
	  "test_stepdet undecided_names_a_marker")

/* The values, by name (struct sp_det_tune t; t.min_repeats). */
struct sp_det_tune {
#define SP_DET_TUNE_FIELD(name, def, lo, hi, stage, why, test) uint64_t name;
	SP_DET_TUNABLES(SP_DET_TUNE_FIELD)
#undef SP_DET_TUNE_FIELD
};

/* One row of the table. */
struct sp_det_tunable {
	const char *name, *stage, *why, *test;
	size_t off;            /* offsetof(struct sp_det_tune, name) */
	uint64_t def, min, max;
};

/* What the library runs. */
extern const struct sp_det_tune sp_det_tune_default;
/* The table, in the order above, and its length. */
extern const struct sp_det_tunable sp_det_tunables[];
extern const size_t sp_det_ntunables;

/* Sets one tunable of t from "NAME=VALUE" (a decimal number within its range). Returns 0, or -1
 * with the reason in err (an unknown name lists the known ones); t is unchanged on error. */
int sp_det_tune_set(struct sp_det_tune *t, const char *assign, char *err, size_t errlen);

/* Sizes of the detector's tables: capacities, not tunables (changing one changes no decision
 * that the corpus has shown to matter, only how much is remembered). */
#define SP_AUTOSTEP_SLOTS 65536u  /* token histogram slots (ids folded into it) */
#define SP_DET_NVTX_SLOTS 1024u   /* NVTX message -> token cache */
#define SP_DET_LAUNCHERS 16u      /* threads remembered as launching work */
#define SP_DET_SCAN_MAX 8u        /* the most search windows (scan_windows) */

#endif
