/* SPDX-License-Identifier: MIT */
/* test_stepdet.c - the step detector (decide/stepdet.h) driven by tokens, as the library and
 * `stepprof autostep` drive it: explicit markers, the lock, what it asks to watch, the per-step
 * check, unlock and re-lock with consistent step numbers, and the undecided report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "collector/base/intern.h"
#include "decide/stepdet.h"
#include "config/config.h"

static struct sp_stepdet det;
static uint64_t now = 1000000;
static uint64_t rng = 12345;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)((rng >> 33) % n);
}

static unsigned feed(int kind, int flags, const char *name, uint64_t gap, struct sp_det_out *o)
{
	struct sp_token t = { .kind = (uint8_t)kind, .flags = (uint8_t)flags, .tid = 1 };
	now += gap;
	t.ts = now;
	t.name = name ? sp_intern(name) : 0;
	sp_stepdet_feed(&det, &t, o);
	return o->what;
}

static void explicit_kernel_every_two(void **state)
{
	struct sp_det_out o;
	int64_t steps[8];
	int n = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_KERNEL, "step_k*", 2, NULL), 0);
	assert_int_equal(sp_stepdet_wants(&det), SP_WANT_LAUNCH);
	for (int i = 0; i < 12; i++) {
		feed(SP_TOK_KERNEL, 0, "other", 1000, &o);
		assert_int_equal(o.what, 0);
		if (feed(SP_TOK_KERNEL, 0, "step_kernel", 1000, &o) & SP_DET_BOUNDARY)
			steps[n++] = o.step;
	}
	assert_int_equal(n, 6); /* occurrences 0, 2, 4, ... */
	for (int i = 0; i < n; i++)
		assert_int_equal(steps[i], i);
	assert_true(sp_stepdet_settled(&det));
	sp_stepdet_free(&det);
}

static void profiler_ranges(void **state)
{
	struct sp_det_out o;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_PROFILER_RANGE, "", 1, NULL), 0);
	assert_int_equal(feed(SP_TOK_API, 0, "cudaProfilerStart", 10, &o), SP_DET_BOUNDARY);
	assert_int_equal(o.step, 0);
	assert_int_equal(feed(SP_TOK_API, 0, "cudaProfilerStop", 10, &o), SP_DET_END);
	assert_int_equal(feed(SP_TOK_API, 0, "cuProfilerStart", 10, &o), SP_DET_BOUNDARY);
	assert_int_equal(o.step, 1);
	sp_stepdet_free(&det);
}

static void nvtx_marker(void **state)
{
	struct sp_det_out o;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_NVTX, "train step*", 1, NULL), 0);
	assert_int_equal(feed(SP_TOK_NVTX_PUSH, 0, "forward", 10, &o), 0);
	assert_int_equal(feed(SP_TOK_NVTX_PUSH, 0, "train step 7", 10, &o), SP_DET_BOUNDARY);
	assert_int_equal(feed(SP_TOK_TRUTH, 0, "train step 8", 10, &o), 0); /* truth is never a token */
	assert_int_equal(feed(SP_TOK_NVTX_POP, 0, NULL, 10, &o), 0);
	sp_stepdet_free(&det);
}

/* One iteration of a training loop: `k` launches (names a_0..), a sync, the loop's wrap. Returns
 * the OR of the decisions; *step is the last boundary's step. */
static unsigned iteration(const char *prefix, int k, int64_t *step, uint64_t wrap)
{
	struct sp_det_out o;
	char nm[32];
	unsigned all = 0;
	for (int i = 0; i < k; i++) {
		snprintf(nm, sizeof nm, "%s_%d", prefix, i);
		all |= feed(SP_TOK_KERNEL, 0, nm, i ? 4000 + rnd(2000) : wrap, &o);
		if (o.what & (SP_DET_BOUNDARY | SP_DET_LOCK))
			*step = o.step;
	}
	all |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
	if (o.what & (SP_DET_BOUNDARY | SP_DET_LOCK))
		*step = o.step;
	now += 500000; /* the GPU catches up */
	return all;
}

static void auto_lock_watch_and_check(void **state)
{
	int64_t step = -1;
	int k;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	unsigned w0 = sp_stepdet_wants(&det);
	assert_true((w0 & SP_WANT_LAUNCH) && (w0 & SP_WANT_API) && (w0 & SP_WANT_GRAPH) && (w0 & SP_WANT_NVTX));
	for (k = 0; k < 20 && !(iteration("a", 30, &step, 200000) & SP_DET_LOCK); k++)
		;
	assert_true(k < 8);                 /* a synchronised loop locks within a few iterations */
	assert_int_equal(step, k + 1);      /* numbered from the first iteration: the lock comes at the
					     * end of iteration k, so the open step is iteration k + 1 */
	int64_t watched = step; /* the first step watched from its start (the lock's open one ended) */
	assert_string_equal(sp_intern_lookup(sp_stepdet_anchor_name(&det)), "cudaStreamSynchronize");
	assert_true(det.how.after);
	/* launches are watched besides the anchor: every whole step is counted */
	assert_int_equal(sp_stepdet_wants(&det), SP_WANT_ANCHOR | SP_WANT_LAUNCH | SP_WANT_GRAPH);
	int64_t counted = -1;
	for (int i = 0; i < 100; i++) {
		int64_t prev = step;
		unsigned w = iteration("a", 30, &step, 200000);
		assert_true(w & SP_DET_BOUNDARY);
		assert_false(w & (SP_DET_MISMATCH | SP_DET_UNLOCK));
		assert_int_equal(step, prev + 1);
		if (counted < 0 && sp_stepdet_sched_step(&det, step) >= 0)
			counted = step;
	}
	/* no backward or optimizer kernel: the schedule counts its steps from its defer_steps-th in a
	 * row on (step defer_steps - 1: those before the lock count), numbered as the program's (no
	 * schedule here: no late start); it settles late (a training loop may still come) */
	assert_true(watched < counted);
	assert_int_equal(counted, (int64_t)sp_det_tune_default.defer_steps - 1);
	assert_false(sp_stepdet_settled(&det));
	assert_int_equal(sp_stepdet_sched_step(&det, step), step);
	for (int i = 0; i < 200; i++)
		iteration("a", 30, &step, 200000);
	assert_true(sp_stepdet_settled(&det));
	/* every step stays counted: its launches are the check */
	assert_int_equal(sp_stepdet_wants(&det), SP_WANT_ANCHOR | SP_WANT_LAUNCH | SP_WANT_GRAPH);
	sp_stepdet_free(&det);
}

/* The sparse check (sp_stepdet_sparse) as the library runs it: launches wanted in one step of 16
 * only; blind (parked: no launch seen), no step is counted and each is checked by its time; a
 * regime change shows as a step whose time stands out (a probe, wanting launches again), and the
 * step counted once the caller sees launches again refutes the regime, which re-locks. */
static void sparse_blind_probe(void **state)
{
	int64_t step = -1;
	int k, wanted = 0;
	unsigned all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_sparse(&det, SP_STEPDET_SPARSE, NULL);
	for (k = 0; k < 20 && !(iteration("adam", 30, &step, 200000) & SP_DET_LOCK); k++)
		;
	assert_true(k < 8);
	for (int i = 0; i < 64; i++) {
		all |= iteration("adam", 30, &step, 200000);
		wanted += (sp_stepdet_wants(&det) & SP_WANT_LAUNCH) != 0;
	}
	assert_false(all & (SP_DET_MISMATCH | SP_DET_UNLOCK | SP_DET_PROBE));
	assert_int_equal(wanted, 64 / SP_STEPDET_SPARSE); /* the counted steps only */
	assert_true(det.check.ref_ns > 0);
	/* blind: no step is counted, none wants launches, the same loop passes its time check */
	sp_stepdet_blind(&det, 1);
	all = 0;
	for (int i = 0; i < 40; i++) {
		all |= iteration("adam", 30, &step, 200000);
		assert_true(sp_stepdet_sparse_quiet(&det));
	}
	assert_false(all & (SP_DET_MISMATCH | SP_DET_UNLOCK | SP_DET_PROBE));
	/* the loop changes (four times the launches, a long wrap): the first step of it is a probe,
	 * which wants launches; still blind, nothing is refuted */
	all = iteration("adam", 120, &step, 4000000);
	all |= iteration("adam", 120, &step, 4000000);
	assert_true(all & SP_DET_PROBE);
	assert_false(all & (SP_DET_MISMATCH | SP_DET_UNLOCK));
	assert_true(sp_stepdet_wants(&det) & SP_WANT_LAUNCH);
	assert_false(sp_stepdet_sparse_quiet(&det));
	assert_int_equal(det.probes, 1);
	/* launches seen again: the next step is counted, differs and is refuted; the new loop locks */
	sp_stepdet_blind(&det, 0);
	all = 0;
	for (int i = 0; i < 20 && !(all & SP_DET_RELOCK); i++)
		all |= iteration("adam", 120, &step, 4000000);
	assert_true(all & SP_DET_MISMATCH);
	assert_true(all & SP_DET_UNLOCK);
	assert_true(all & SP_DET_RELOCK);
	assert_int_equal(det.how.launches, 120);
	assert_int_equal(det.how.mismatches, 1);
	sp_stepdet_free(&det);
}

/* An established regime keeps its lock through one step with a few launches more (an extra
 * kernel every N iterations): the step is said (MISMATCH without UNLOCK) and the numbering goes
 * on; two such steps in a row, or one with fewer launches (an anchor call out of place), end it. */
static void irregular_step_kept(void **state)
{
	int64_t step = -1, prev;
	unsigned w;
	struct sp_det_out o;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int k = 0; k < 20 && !(iteration("t", 40, &step, 200000) & SP_DET_LOCK); k++)
		;
	for (int i = 0; i < 20; i++)
		iteration("t", 40, &step, 200000);
	for (int round = 0; round < 3; round++) {
		prev = step;
		w = feed(SP_TOK_KERNEL, 0, "norm_logged", 1000, &o) | iteration("t", 40, &step, 200000);
		assert_true(w & SP_DET_MISMATCH);
		assert_false(w & SP_DET_UNLOCK);
		assert_int_equal(step, prev + 1);
		for (int i = 0; i < 6; i++) {
			prev = step;
			w = iteration("t", 40, &step, 200000);
			assert_false(w & (SP_DET_MISMATCH | SP_DET_UNLOCK));
			assert_int_equal(step, prev + 1);
		}
	}
	assert_int_equal(det.how.mismatches, 3);
	assert_int_equal(det.how.relocks, 0);
	/* two in a row: the second ends the regime */
	w = feed(SP_TOK_KERNEL, 0, "norm_logged", 1000, &o) | iteration("t", 40, &step, 200000);
	assert_false(w & SP_DET_UNLOCK);
	w = feed(SP_TOK_KERNEL, 0, "norm_logged", 1000, &o) | iteration("t", 40, &step, 200000);
	assert_true((w & SP_DET_MISMATCH) && (w & SP_DET_UNLOCK));
	for (int k = 0; k < 20 && !(iteration("t", 40, &step, 200000) & SP_DET_LOCK); k++)
		;
	for (int i = 0; i < 20; i++)
		iteration("t", 40, &step, 200000);
	/* an extra sync splits a step (fewer launches): the regime ends at once */
	for (int i = 0; i < 10; i++)
		feed(SP_TOK_KERNEL, 0, "t_0", 4000, &o);
	w = feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
	assert_true((w & SP_DET_MISMATCH) && (w & SP_DET_UNLOCK));
	sp_stepdet_free(&det);
}

/* The irregular step's bounds: more than 1/8 extra launches, an irregular step within 4 steps of
 * the last one, or any extra launch in a period under 8 launches is refuted. */
static void irregular_bounds(void **state)
{
	int64_t step = -1;
	unsigned w;
	struct sp_det_out o;
	static const struct {
		int k, extra, gap; /* period launches, extra launches, steps since the last irregular one */
		int kept;
	} cases[] = { { 40, 5, 9, 1 }, { 40, 6, 9, 0 }, { 40, 1, 3, 0 }, { 40, 1, 4, 1 }, { 4, 1, 9, 0 } };
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
		for (int k = 0; k < 20 && !(iteration("t", cases[c].k, &step, 200000) & SP_DET_LOCK); k++)
			;
		for (int i = 0; i < 20; i++)
			iteration("t", cases[c].k, &step, 200000);
		if (cases[c].gap < 9) { /* an irregular step first, then gap - 1 regular ones */
			w = feed(SP_TOK_KERNEL, 0, "norm", 1000, &o) | iteration("t", cases[c].k, &step, 200000);
			assert_true((w & SP_DET_MISMATCH) && !(w & SP_DET_UNLOCK));
			for (int i = 1; i < cases[c].gap; i++)
				assert_false(iteration("t", cases[c].k, &step, 200000) & SP_DET_MISMATCH);
		}
		w = 0;
		for (int e = 0; e < cases[c].extra; e++)
			w |= feed(SP_TOK_KERNEL, 0, "norm", 1000, &o);
		w |= iteration("t", cases[c].k, &step, 200000);
		assert_true(w & SP_DET_MISMATCH);
		assert_int_equal(!(w & SP_DET_UNLOCK), cases[c].kept);
		sp_stepdet_free(&det);
	}
}

/* Two loops that look like "one iteration, an occasional extra" and are not (review of the block
 * and irregular rules):
 *  - inference, six identical 40-launch layers and one sync a forward pass: the period is six
 *    copies of a layer plus the sync, and a layer shows no training evidence: one step a pass;
 *  - gradient accumulation, 8 micro-steps that each read their loss, then one Adam launch: the
 *    optimizer is not an irregular extra kernel (the micro-step has none), the step is the
 *    optimizer step. */
static void layers_and_micro_steps_are_not_iterations(void **state)
{
	struct sp_det_out o;
	char nm[32];
	int64_t step = -1;
	unsigned all = 0;
	int bounds = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int it = 0; it < 60; it++) {
		for (int l = 0; l < 6; l++)
			for (int i = 0; i < 40; i++) {
				snprintf(nm, sizeof nm, "layer_%d", i);
				all |= feed(SP_TOK_KERNEL, 0, nm, i ? 4000 + rnd(2000) : 30000, &o);
			}
		all |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaDeviceSynchronize", 3000, &o);
		bounds += (o.what & SP_DET_BOUNDARY) != 0;
		now += 500000;
	}
	assert_true(all & SP_DET_LOCK);
	assert_int_equal(det.how.launches, 240);
	assert_int_equal(det.a.blocks, 1);
	assert_true(bounds >= 50 && bounds <= 60);
	sp_stepdet_free(&det);

	int kept = 0;
	all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int it = 0; it < 60; it++)
		for (int m = 0; m < 8; m++) {
			for (int i = 0; i < 40; i++) {
				snprintf(nm, sizeof nm, "fwdbwd_%d", i);
				all |= feed(SP_TOK_KERNEL, 0, nm, i ? 4000 + rnd(2000) : 200000, &o);
			}
			unsigned w = feed(SP_TOK_API, SP_TOKF_SYNC, "cudaMemcpy", 3000, &o); /* loss.item() */
			all |= w;
			kept += (w & SP_DET_MISMATCH) && !(w & SP_DET_UNLOCK);
			now += 300000;
			if (m == 7)
				all |= feed(SP_TOK_KERNEL, 0, "multi_tensor_apply_kernel<FusedAdamMathFunctor>", 4000,
					    &o);
		}
	(void)step;
	assert_int_equal(kept, 0);
	assert_int_equal(det.how.launches, 8 * 40 + 1);
	sp_stepdet_free(&det);
}

/* An extra call of the anchor's function in an established regime (a loss or norm read for
 * logging): two thirds into a step, or right after its boundary, it is no boundary, and the step
 * keeps its launches and its number; a second one in the same step, or a step that then has other
 * launches than the period's, is refuted. */
static void extra_anchor_call(void **state)
{
	int64_t step = -1, prev;
	unsigned w;
	struct sp_det_out o;
	char nm[32];
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int k = 0; k < 20 && !(iteration("t", 40, &step, 200000) & SP_DET_LOCK); k++)
		;
	for (int i = 0; i < 20; i++)
		iteration("t", 40, &step, 200000);
	for (int at = 0; at <= 27; at += 27) { /* right after the boundary, then two thirds in */
		prev = step;
		w = 0;
		for (int i = 0; i < 40; i++) {
			if (i == at)
				w |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
			snprintf(nm, sizeof nm, "t_%d", i);
			w |= feed(SP_TOK_KERNEL, 0, nm, 4000, &o);
		}
		w |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
		if (o.what & SP_DET_BOUNDARY)
			step = o.step;
		now += 500000;
		assert_false(w & (SP_DET_MISMATCH | SP_DET_UNLOCK));
		assert_int_equal(step, prev + 1); /* one step, not two */
		for (int i = 0; i < 3; i++)
			assert_false(iteration("t", 40, &step, 200000) & (SP_DET_MISMATCH | SP_DET_UNLOCK));
	}
	assert_int_equal(det.how.relocks, 0);
	/* an extra call, then a step with one launch fewer: refuted (it must match exactly) */
	w = 0;
	for (int i = 0; i < 39; i++) {
		if (i == 30)
			w |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
		snprintf(nm, sizeof nm, "t_%d", i);
		w |= feed(SP_TOK_KERNEL, 0, nm, 4000, &o);
	}
	w |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
	assert_true((w & SP_DET_MISMATCH) && (w & SP_DET_UNLOCK));
	sp_stepdet_free(&det);
}

/* The loop changes (an evaluation phase of another shape), then comes back: the detector refutes
 * the step that differs, learns again, and the training regime resumes its own step numbers. */
static void phase_change_and_relock(void **state)
{
	int64_t step = -1, iter_of_step0;
	int k;
	unsigned all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (k = 0; !(iteration("t", 40, &step, 200000) & SP_DET_LOCK); k++)
		;
	iter_of_step0 = k - step;
	for (k++; k < 30; k++)
		iteration("t", 40, &step, 200000);
	assert_int_equal(step - (k - 1), -iter_of_step0);
	for (int e = 0; e < 12; e++) /* evaluation: 12 passes of another shape, same sync */
		all |= iteration("e", 15, &step, 50000);
	assert_true(all & SP_DET_MISMATCH);
	assert_true(all & SP_DET_UNLOCK);
	all = 0;
	int64_t seen = -1, first_seen = INT64_MIN;
	for (int i = 0; i < 40; i++, k++) {
		unsigned w = iteration("t", 40, &step, 200000);
		all |= w;
		if ((w & SP_DET_BOUNDARY) && first_seen == INT64_MIN)
			first_seen = step - k;
		if (w & SP_DET_BOUNDARY) {
			seen = step - k;
			assert_int_equal(seen, first_seen); /* one step per iteration after the re-lock */
		}
	}
	assert_true(all & SP_DET_RELOCK);
	assert_int_equal(det.how.regime, 1); /* the training regime, not a new one */
	/* its steps go on from its last one: the iterations it saw while learning again are counted,
	 * the one an evaluation regime's steps covered is not (numbering may shift back by that) */
	assert_true(seen <= -iter_of_step0 && seen >= -iter_of_step0 - 2);
	sp_stepdet_free(&det);
}

/* Records the decisions of `n` iterations: MINOR boundaries and boundaries the schedule counts. */
static void phase(const char *prefix, int k, int n, int64_t *step, unsigned *all, int *minor, int *counted)
{
	for (int i = 0; i < n; i++) {
		unsigned w = iteration(prefix, k, step, prefix[0] == 'e' ? 50000 : 200000);
		*all |= w;
		if (w & SP_DET_BOUNDARY) {
			*minor += (w & SP_DET_MINOR) != 0;
			*counted += sp_stepdet_sched_step(&det, *step) >= 0;
			assert_int_equal(!(w & SP_DET_MINOR), sp_stepdet_sched_step(&det, *step) >= 0);
		}
	}
}

/* An evaluation regime before training and again every N steps: its steps never count towards the
 * schedule; the training regime's (backward kernels in its period) always do, numbered as they are. */
static void eval_first_prefers_training(void **state)
{
	int64_t step = -1;
	unsigned all = 0;
	int minor = 0, counted = 0;
	char note[700];
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	phase("eval", 15, 20, &step, &all, &minor, &counted);
	assert_true(all & SP_DET_LOCK);
	assert_true(minor > 5 && counted == 0); /* deferred: not proven, no training seen */
	assert_int_equal(sp_stepdet_regime_note(&det, note, sizeof note), 1);
	assert_non_null(strstr(note, "no backward or optimizer kernel"));
	all = 0, minor = 0, counted = 0;
	phase("layer_backward", 40, 40, &step, &all, &minor, &counted);
	assert_true(all & SP_DET_RELOCK);
	assert_true(counted > 25 && minor == 0);
	assert_int_equal(sp_stepdet_sched_step(&det, step), step); /* training: no shift */
	int64_t train_reg = det.how.regime;
	all = 0, minor = 0, counted = 0;
	phase("eval", 15, 40, &step, &all, &minor, &counted); /* longer than the deferral: still minor */
	assert_true(minor > 20 && counted == 0);
	assert_false(all & SP_DET_PROVEN);
	assert_false(sp_stepdet_settled(&det));
	assert_int_equal(sp_stepdet_regime_note(&det, note, sizeof note), 1);
	assert_non_null(strstr(note, "not recorded"));
	all = 0, minor = 0, counted = 0;
	phase("layer_backward", 40, 20, &step, &all, &minor, &counted);
	assert_int_equal(det.how.regime, train_reg);
	assert_true(counted > 5 && minor == 0);
	/* the replay's switch turns the preference off: every regime counts */
	det.no_prefer = 1;
	phase("eval", 15, 20, &step, &all, &minor, &counted);
	assert_int_equal(minor, 0);
	sp_stepdet_free(&det);
}

/* Issue 12 (nanoGPT under DDP): the training loop changes after its window (an evaluation, then
 * a loop of another shape: a new training regime), with a repeating schedule. Step numbers of
 * counted boundaries only grow and no schedule step with an action is handed out twice, whatever
 * regime counts (the same loop with other API calls: tests/e2e/gen_tokens.c ddp_evalmid). */
static void numbering_never_goes_back(void **state)
{
	struct sp_schedule sch = { .skip_first = 10, .wait = 5, .warmup = 1, .active = 3, .repeat = 0 };
	int64_t step = -1, last_step = -1, last_sched = -1, given[512];
	int ngiven = 0;
	unsigned all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &sch);
	static const struct {
		const char *prefix;
		int k, n;
	} phases[] = { { "layer_backward", 40, 25 }, { "eval", 15, 6 }, { "layer_backward", 40, 20 }, { "eval", 15, 6 },
		       { "layer_backward", 41, 30 }, { "eval", 15, 6 }, { "layer_backward", 41, 30 } };
	for (size_t p = 0; p < sizeof phases / sizeof *phases; p++)
		for (int i = 0; i < phases[p].n; i++) {
			uint64_t wrap = phases[p].prefix[0] == 'e' ? 50000 : 200000;
			unsigned w = iteration(phases[p].prefix, phases[p].k, &step, wrap);
			all |= w;
			int64_t sc = sp_stepdet_sched_step(&det, step);
			if (!(w & SP_DET_BOUNDARY) || sc < 0)
				continue;
			assert_true(step > last_step);
			last_step = step;
			if (sp_schedule_action(&sch, sc) == SP_ACT_NONE ||
			    sp_schedule_action(&sch, sc) == SP_ACT_WARMUP) {
				assert_true(sc >= last_sched);
			} else {
				for (int g = 0; g < ngiven; g++)
					assert_true(given[g] != sc);
				assert_true(ngiven < 512);
				given[ngiven++] = sc;
				assert_true(sc > last_sched);
			}
			last_sched = sc;
		}
	assert_true(all & SP_DET_RELOCK);
	assert_true(det.regimes.n >= 3);      /* eval, training, training of another shape */
	assert_true(ngiven >= 6);        /* windows in both training shapes */
	sp_stepdet_free(&det);
}

/* Training, an evaluation pass across the schedule's window, training again: the window is not
 * lost in the re-lock's gap (llm.c, skip_first 10, wait 10) but taken by the first steps watched
 * after it; a schedule whose window lies past the gap keeps the program's numbering. */
static void relock_gap_keeps_window(void **state)
{
	struct sp_schedule sch = { .skip_first = 10, .wait = 10, .warmup = 1, .active = 3, .repeat = 1 };
	struct sp_schedule late = { .skip_first = 60, .wait = 0, .warmup = 1, .active = 3, .repeat = 1 };
	for (int v = 0; v < 2; v++) {
		int64_t step = -1, rec[8];
		unsigned all = 0, relock = 0;
		int minor = 0, counted = 0, n = 0, warm = 0;
		assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
		sp_stepdet_schedule(&det, v ? &late : &sch);
		phase("layer_backward", 40, 18, &step, &all, &minor, &counted);
		assert_true(step < 20); /* the training ends before the window's warmup (step 20) */
		phase("eval", 15, 8, &step, &all, &minor, &counted);
		for (int i = 0; i < 60; i++) {
			unsigned w = iteration("layer_backward", 40, &step, 200000);
			enum sp_action a = sp_schedule_action(v ? &late : &sch, sp_stepdet_sched_step(&det, step));
			relock |= w & SP_DET_RELOCK;
			if (!relock || !(w & SP_DET_BOUNDARY))
				continue;
			if ((a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE) && n < 8)
				rec[n++] = step;
			else if (a == SP_ACT_WARMUP && !n)
				warm = 1; /* watched before the window, after the re-lock */
		}
		assert_int_equal(n, 3);
		assert_true(warm);
		assert_true(rec[0] > 23); /* the program's steps 20-23 went by while it learned again */
		assert_true(rec[1] == rec[0] + 1 && rec[2] == rec[0] + 2);
		if (v) /* past the gap: the program's numbering */
			assert_int_equal(rec[0], 61);
		sp_stepdet_free(&det);
	}
}

/* Feeds n iterations of the loop `prefix` and returns how many steps schedule sch records (their
 * numbers from *rec on, rec[0..]); *lock is the step open at the lock, if one came. */
static int recorded_steps(const struct sp_schedule *sch, const char *prefix, int n, int64_t *lock, int64_t *rec)
{
	int64_t step = -1;
	int got = 0;
	for (int i = 0; i < n; i++) {
		int64_t before = step;
		unsigned w = iteration(prefix, 30, &step, 200000);
		if ((w & SP_DET_LOCK) && !(w & SP_DET_RELOCK))
			*lock = before + 1 > 0 ? before + 1 : det.step - (w & SP_DET_BOUNDARY ? 1 : 0);
		enum sp_action act = sp_schedule_action(sch, sp_stepdet_sched_step(&det, step));
		if ((w & SP_DET_BOUNDARY) && (act == SP_ACT_RECORD || act == SP_ACT_RECORD_AND_SAVE))
			rec[got++] = step;
	}
	return got;
}

/* The lock comes after the schedule's first window would have begun (wait 2: a warmup at step 2;
 * a synchronised loop locks in its 5th iteration): the schedule starts from the lock instead, so
 * both windows (repeat 2) are recorded, three steps each, the first right after the lock, and the
 * detector says so once. A lock before the first window keeps the program's numbering. */
static void late_lock_starts_the_schedule(void **state)
{
	struct sp_schedule late = { .wait = 2, .warmup = 1, .active = 3, .repeat = 2 };
	struct sp_schedule early = { .skip_first = 20, .wait = 2, .warmup = 1, .active = 3, .repeat = 1 };
	int64_t lock = -1, rec[64];
	char note[700];
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &late);
	assert_int_equal(recorded_steps(&late, "layer_backward", 40, &lock, rec), 6);
	assert_true(lock >= 3); /* after the first warmup: the late start applies */
	int64_t first = det.regimes.late.step; /* the step after the lock's: the schedule's step 2 */
	assert_true(first > lock);
	assert_int_equal(sp_stepdet_sched_step(&det, first), 2);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rec[i], first + 1 + i); /* the first window: after its warmup */
		assert_int_equal(rec[3 + i], first + 7 + i); /* the second, a cycle (6 steps) later */
	}
	assert_int_equal(det.how.late, first - 2);
	assert_int_equal(sp_stepdet_regime_note(&det, note, sizeof note), 1);
	assert_non_null(strstr(note, "after the schedule's first window would have begun (its step 2)"));
	assert_int_equal(sp_stepdet_regime_note(&det, note, sizeof note), 0); /* said once */
	sp_stepdet_free(&det);

	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &early);
	assert_int_equal(recorded_steps(&early, "layer_backward", 40, &lock, rec), 3);
	assert_int_equal(rec[0], 23); /* skip_first 20, wait 2, warmup 1: the program's numbering */
	assert_int_equal(det.how.late, 0);
	assert_int_equal(sp_stepdet_regime_note(&det, note, sizeof note), 0);
	sp_stepdet_free(&det);
}

/* An inference loop (no backward or optimizer kernel) of 40 iterations with the default schedule
 * (wait 10, warmup 1, active 3): deferred until it ran defer_steps steps in a row, the iterations
 * the learner saw before its lock included, then the schedule starts from there (its first window
 * would have begun): the window's three steps are recorded within the 40 iterations. */
static void short_inference_loop_records(void **state)
{
	struct sp_config cfg;
	int64_t lock = -1, rec[64];
	char note[700];
	unsigned said = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &cfg.schedule);
	assert_int_equal(recorded_steps(&cfg.schedule, "fwd", 40, &lock, rec), 3);
	assert_true(rec[2] < 39);
	assert_int_equal(rec[0], (int64_t)sp_det_tune_default.defer_steps); /* after its warmup */
	while (sp_stepdet_regime_note(&det, note, sizeof note))
		said |= (strstr(note, "taken for the program's loop") ? 1u : 0) |
			(strstr(note, "the schedule starts from here") ? 2u : 0);
	assert_int_equal(said, 3u);
	sp_stepdet_free(&det);
}

/* A run too short for its schedule says why it recorded nothing: an inference loop still deferred
 * (no backward or optimizer kernel, fewer than defer_steps steps in a row) when it ended. */
static void short_run_says_why(void **state)
{
	struct sp_config cfg;
	int64_t lock = -1, rec[64];
	char msg[700];
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &cfg.schedule);
	assert_int_equal(sp_stepdet_why_none(&det, 11, msg, sizeof msg), 0); /* learning: undecided says it */
	assert_int_equal(recorded_steps(&cfg.schedule, "fwd", 15, &lock, rec), 0);
	assert_int_equal(sp_stepdet_why_none(&det, 11, msg, sizeof msg), 1);
	assert_non_null(strstr(msg, "launches no backward or optimizer kernel and had run"));
	assert_non_null(strstr(msg, "count towards the schedule from 26 in a row"));
	sp_stepdet_free(&det);
	/* a training loop on the program's numbering: nothing to add to the caller's words */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	sp_stepdet_schedule(&det, &cfg.schedule);
	assert_int_equal(recorded_steps(&cfg.schedule, "layer_backward", 8, &lock, rec), 0);
	assert_int_equal(sp_stepdet_why_none(&det, 11, msg, sizeof msg), 0);
	sp_stepdet_free(&det);
}

static void undecided_names_a_marker(void **state)
{
	struct sp_det_out o;
	char nm[32], msg[700];
	unsigned all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int it = 0; it < 6000; it++) {
		for (int i = 0, n = 5 + (int)rnd(20); i < n; i++) {
			snprintf(nm, sizeof nm, "expert_%u", rnd(40));
			all |= feed(SP_TOK_KERNEL, 0, nm, 5000, &o);
		}
		all |= feed(SP_TOK_API, SP_TOKF_SYNC, "cudaDeviceSynchronize", 3000, &o);
	}
	assert_false(all & SP_DET_LOCK);
	assert_true(all & SP_DET_UNDECIDED);
	assert_int_equal(sp_stepdet_undecided(&det, msg, sizeof msg), 1);
	assert_non_null(strstr(msg, "undecided"));
	assert_non_null(strstr(msg, "kind = api, pattern = cudaDeviceSynchronize"));
	sp_stepdet_free(&det);
}

/* The tokens fed by the advice tests, kept to replay them with an explicit marker. */
static struct sp_token kept[200000];
static size_t nkept;

static unsigned feed_kept(int kind, int flags, const char *name, uint64_t gap, struct sp_det_out *o)
{
	unsigned w = feed(kind, flags, name, gap, o);
	if (nkept < sizeof kept / sizeof *kept)
		kept[nkept++] = (struct sp_token){ .kind = (uint8_t)kind, .flags = (uint8_t)flags, .tid = 1,
						   .ts = now, .name = sp_intern(name) };
	return w;
}

/* Replays the kept tokens with an explicit marker; returns the fewest and the most launches of its
 * steps (the last `last` steps only, 0: all) in *lo, *hi. */
static void replay_marker(int kind, const char *pattern, size_t last, uint64_t *lo, uint64_t *hi)
{
	struct sp_stepdet m;
	struct sp_det_out o;
	uint64_t *per = calloc(nkept + 1, sizeof *per);
	size_t steps = 0;
	assert_non_null(per);
	assert_int_equal(sp_stepdet_init(&m, kind, pattern, 1, NULL), 0);
	for (size_t i = 0; i < nkept; i++) {
		sp_stepdet_feed(&m, &kept[i], &o);
		if (o.what & SP_DET_BOUNDARY)
			steps++;
		if (steps && (kept[i].kind == SP_TOK_KERNEL || kept[i].kind == SP_TOK_GRAPH))
			per[steps - 1]++;
	}
	assert_true(steps > 2);
	*lo = UINT64_MAX, *hi = 0;
	for (size_t k = last && steps - 1 > last ? steps - 1 - last : 0; k + 1 < steps; k++) { /* whole steps */
		*lo = per[k] < *lo ? per[k] : *lo;
		*hi = per[k] > *hi ? per[k] : *hi;
	}
	sp_stepdet_free(&m);
	free(per);
}

/* Gradient accumulation 2 with data-dependent kernels (it never locks) and three synchronising
 * reads together at the end of each iteration (loss and norm logged): the rarest repeating
 * synchronisation, which the advice named before, gives steps of no launch between those reads.
 * The checked advice names the one marker that occurs once per iteration, says its launches per
 * step, and replaying it as an explicit marker gives exactly those. */
static void undecided_advice_is_checked(void **state)
{
	struct sp_det_out o;
	char nm[32], msg[900];
	unsigned all = 0;
	uint64_t lo, hi;
	unsigned long long a_lo, a_hi;
	nkept = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int it = 0; it < 4000 && !(all & SP_DET_UNDECIDED); it++) {
		for (int mb = 0; mb < 2; mb++) {
			all |= feed_kept(SP_TOK_API, 0, "cudaMemcpyAsync", 200000, &o); /* the batch */
			for (int i = 0, k = 10 + (int)rnd(10); i < k; i++) {
				snprintf(nm, sizeof nm, "%s_%u", i < k / 2 ? "fwd" : "bwd", rnd(40));
				all |= feed_kept(SP_TOK_KERNEL, 0, nm, 5000, &o);
			}
		}
		all |= feed_kept(SP_TOK_KERNEL, 0, "adam_step", 5000, &o);
		for (int r = 0; r < 3; r++)
			all |= feed_kept(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 3000, &o);
	}
	assert_false(all & SP_DET_LOCK);
	assert_true(all & SP_DET_UNDECIDED);
	assert_int_equal(sp_stepdet_undecided(&det, msg, sizeof msg), 1);
	/* what the advice used to name gives empty steps */
	replay_marker(SP_MARK_API, "cudaStreamSynchronize", 0, &lo, &hi);
	assert_int_equal(lo, 0);
	assert_null(strstr(msg, "pattern = cudaStreamSynchronize"));
	const char *s = strstr(msg, "set [marker] kind = kernel, pattern = adam_step: it occurs once in each of the ");
	assert_non_null(s);
	s = strstr(s, "would hold ");
	assert_non_null(s);
	assert_int_equal(sscanf(s, "would hold %llu to %llu launches", &a_lo, &a_hi), 2);
	/* checked: the steps it gives in the stream hold what it says */
	replay_marker(SP_MARK_KERNEL, "adam_step", 100, &lo, &hi);
	assert_true(lo >= 1 && lo >= a_lo && hi <= a_hi);
	sp_stepdet_free(&det);
}

/* Nothing occurs once per period: synchronisations and kernels at random. The advice names no
 * marker and says what would work. */
static void undecided_without_a_marker(void **state)
{
	struct sp_det_out o;
	char nm[32], msg[900];
	unsigned all = 0;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	for (int i = 0; i < 200000 && !(all & SP_DET_UNDECIDED); i++) {
		int sync = rnd(8) == 0;
		snprintf(nm, sizeof nm, sync ? "cudaSync_%u" : "k_%u", rnd(sync ? 3 : 50));
		all |= feed(sync ? SP_TOK_API : SP_TOK_KERNEL, sync ? SP_TOKF_SYNC : 0, nm, 5000, &o);
	}
	assert_true(all & SP_DET_UNDECIDED);
	assert_int_equal(sp_stepdet_undecided(&det, msg, sizeof msg), 1);
	assert_null(strstr(msg, "set [marker]"));
	assert_non_null(strstr(msg, "none is suggested"));
	assert_non_null(strstr(msg, "kind = nvtx"));
	assert_non_null(strstr(msg, "kind = optimizer"));
	sp_stepdet_free(&det);
}

/* sp_stepdet_may_try says 1 exactly for the tokens whose feed runs a detection attempt (the
 * collector reads the clock after each such token to credit the attempt's time back): never
 * missing one, and not answering 1 for other tokens (it did for every token from 64 tokens after
 * an attempt on, because a graph launch may bring the next attempt forward). A stream that never
 * locks, without and with graph launches. */
static void may_try_is_exact(void **state)
{
	char nm[32];
	for (int v = 0; v < 2; v++) {
		unsigned attempts = 0, graph_attempts = 0, extra = 0, missed = 0;
		assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
		for (int i = 0; i < 20000 && det.learning; i++) {
			int graph = v && rnd(16) == 0;
			snprintf(nm, sizeof nm, graph ? "graph_%u" : "expert_%u", rnd(graph ? 4 : 40));
			struct sp_token t = { .kind = graph ? SP_TOK_GRAPH : SP_TOK_KERNEL,
					      .tid = 1,
					      .ts = now += 5000 };
			struct sp_det_out o;
			t.name = sp_intern(nm);
			uint64_t next = det.a.attempt.next;
			int may = sp_stepdet_may_try(&det, &t);
			sp_stepdet_feed(&det, &t, &o);
			int tried = det.a.attempt.next != next || !det.learning;
			attempts += tried;
			graph_attempts += tried && graph && det.a.n < next;
			missed += tried && !may;
			extra += may && !tried;
		}
		assert_true(det.learning);
		assert_int_equal(missed, 0);
		assert_int_equal(extra, 0);
		assert_in_range(attempts, 200, 2000); /* every 8, 32, then 256 tokens (and graph launches) */
		if (v)
			assert_true(graph_attempts > 0); /* graph launches brought attempts forward */
		sp_stepdet_free(&det);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(explicit_kernel_every_two),
		cmocka_unit_test(profiler_ranges),
		cmocka_unit_test(nvtx_marker),
		cmocka_unit_test(auto_lock_watch_and_check),
		cmocka_unit_test(phase_change_and_relock),
		cmocka_unit_test(irregular_step_kept),
		cmocka_unit_test(extra_anchor_call),
		cmocka_unit_test(irregular_bounds),
		cmocka_unit_test(layers_and_micro_steps_are_not_iterations),
		cmocka_unit_test(sparse_blind_probe),
		cmocka_unit_test(eval_first_prefers_training),
		cmocka_unit_test(relock_gap_keeps_window),
		cmocka_unit_test(numbering_never_goes_back),
		cmocka_unit_test(late_lock_starts_the_schedule),
		cmocka_unit_test(short_inference_loop_records),
		cmocka_unit_test(short_run_says_why),
		cmocka_unit_test(undecided_names_a_marker),
		cmocka_unit_test(undecided_advice_is_checked),
		cmocka_unit_test(undecided_without_a_marker),
		cmocka_unit_test(may_try_is_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
