/* SPDX-License-Identifier: MIT */
/* test_stepdet_py.c - the step detector on the Python bridge's tokens (decide/stepdet.h,
 * sp_stepdet_py_feed): an optimizer marker (step 0 from the hook's install, one step per
 * iteration of a GAN, every), a python marker (each call of its function, every), and kind = auto
 * switching to the program's optimizer steps (numbered from the install, nothing wanted from
 * CUPTI after) unless a window of automatic steps has begun. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "collector/base/intern.h"
#include "config/config.h"
#include "decide/stepdet.h"

static struct sp_stepdet det;
static uint64_t now = 1000000;

static unsigned feed(int kind, const char *name, struct sp_det_out *o)
{
	struct sp_token t = { .kind = (uint8_t)kind, .tid = 1, .name = name ? sp_intern(name) : 0 };
	now += 100000;
	t.ts = now;
	sp_stepdet_feed(&det, &t, o);
	return o->what;
}

/* One iteration of a synchronised loop: 30 launches and a cudaStreamSynchronize. Returns the
 * decisions' bits together, the last boundary's or lock's step in *step. */
static unsigned cuda_iteration(int64_t *step)
{
	struct sp_det_out o;
	char nm[32];
	unsigned all = 0;
	for (int i = 0; i < 30; i++) {
		snprintf(nm, sizeof nm, "k_%d", i);
		all |= feed(SP_TOK_KERNEL, nm, &o);
		if (o.what & (SP_DET_BOUNDARY | SP_DET_LOCK))
			*step = o.step;
	}
	struct sp_token t = { .kind = SP_TOK_API,
			      .flags = SP_TOKF_SYNC,
			      .tid = 1,
			      .name = sp_intern("cudaStreamSynchronize"),
			      .ts = now += 3000 };
	sp_stepdet_feed(&det, &t, &o);
	if (o.what & (SP_DET_BOUNDARY | SP_DET_LOCK))
		*step = o.step;
	now += 500000;
	return all | o.what;
}

static void optimizer_marker(void **state)
{
	(void)state;
	struct sp_det_out o;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_OPTIMIZER, "", 1, NULL), 0);
	assert_int_equal(sp_stepdet_wants(&det), 0); /* nothing from CUPTI */
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o), SP_DET_BOUNDARY); /* no install seen: step 0 here */
	assert_int_equal(o.step, 0);
	sp_stepdet_free(&det);

	assert_int_equal(sp_stepdet_init(&det, SP_MARK_OPTIMIZER, "", 1, NULL), 0);
	assert_int_equal(feed(SP_TOK_PYHOOK, "optimizer", &o), SP_DET_BOUNDARY);
	assert_int_equal(o.step, 0); /* step 0 begins at the install */
	assert_int_equal(feed(SP_TOK_PYHOOK, "GradScaler.update", &o), 0);
	assert_int_equal(feed(SP_TOK_PYCALL, "__main__:f", &o), 0);
	/* a GAN: one step per iteration, ending at the generator's once the cycle is confirmed */
	int64_t last = 0;
	int boundaries = 0;
	for (int it = 0; it < 20; it++) {
		feed(SP_TOK_OPTIM, "Adam#1", &o);
		unsigned a = o.what;
		if (a & SP_DET_BOUNDARY)
			last = o.step, boundaries++;
		feed(SP_TOK_OPTIM, "Adam#2", &o);
		if (o.what & SP_DET_BOUNDARY)
			last = o.step, boundaries++;
		if (it >= 5)
			assert_true((o.what & SP_DET_BOUNDARY) && !(a & SP_DET_BOUNDARY));
	}
	assert_int_equal(boundaries, 20);
	assert_int_equal(last, 20);
	assert_string_equal(sp_intern_lookup(det.how.anchor), "Adam#2");
	assert_int_equal(det.how.period, 2);
	assert_int_equal(det.how.launches, 2);
	assert_int_equal(det.how.confidence, SP_PYRULE_CYCLE);
	assert_int_equal(det.how.marker_kind, SP_MARK_OPTIMIZER);
	assert_true(sp_stepdet_settled(&det));
	assert_int_equal(sp_stepdet_sched_step(&det, 7), 7);
	sp_stepdet_free(&det);

	/* every = 2: a step every second iteration; a scaler's update ends them once seen */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_OPTIMIZER, "", 2, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	boundaries = 0;
	for (int it = 0; it < 10; it++) {
		boundaries += (feed(SP_TOK_OPTIM, "SGD#1", &o) & SP_DET_BOUNDARY) != 0;
		boundaries += (feed(SP_TOK_SCALER, "GradScaler#1", &o) & SP_DET_BOUNDARY) != 0;
	}
	assert_int_equal(boundaries, 5);
	assert_int_equal(det.how.confidence, SP_PYRULE_SCALER);
	assert_string_equal(sp_intern_lookup(det.how.anchor), "GradScaler#1");
	sp_stepdet_free(&det);
}

static void python_marker(void **state)
{
	(void)state;
	struct sp_det_out o;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_PYTHON, "__main__:train_step", 2, NULL), 0);
	assert_int_equal(sp_stepdet_wants(&det), 0);
	assert_int_equal(feed(SP_TOK_PYHOOK, "__main__:train_step", &o), 0);
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o), 0);
	assert_int_equal(feed(SP_TOK_PYCALL, "__main__:evaluate", &o), 0);
	assert_int_equal(feed(SP_TOK_PYCALL, "__main__:train_step", &o), SP_DET_BOUNDARY);
	assert_int_equal(o.step, 0); /* the first call begins step 0 */
	assert_int_equal(feed(SP_TOK_PYCALL, "__main__:train_step", &o), 0);
	assert_int_equal(feed(SP_TOK_PYCALL, "__main__:train_step", &o), SP_DET_BOUNDARY);
	assert_int_equal(o.step, 1);
	assert_int_equal(feed(SP_TOK_KERNEL, "__main__:train_step", &o), 0); /* only its calls */
	sp_stepdet_free(&det);
}

/* kind = auto: the period detector learns (and here locks) until the optimizer hook, installed,
 * fires; then the steps are the program's optimizer steps, numbered from the install (step 0 is
 * the install to the first optimizer step), and the detector wants nothing any more. */
static void auto_switches(void **state)
{
	(void)state;
	struct sp_det_out o;
	int64_t step = -1;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o), 0); /* no hook installed: nothing */
	assert_int_equal(feed(SP_TOK_PYHOOK, "optimizer", &o), 0);
	unsigned all = 0;
	for (int i = 0; i < 12; i++)
		all |= cuda_iteration(&step);
	assert_true(all & SP_DET_LOCK);
	assert_true(step >= 10);
	assert_true(feed(SP_TOK_OPTIM, "Adam#1", &o) & SP_DET_SWITCH);
	assert_true(o.what & SP_DET_BOUNDARY);
	assert_true(o.what & SP_DET_WANTS);
	assert_int_equal(o.step, 1);
	assert_int_equal(sp_stepdet_wants(&det), 0);
	assert_int_equal(det.how.marker_kind, SP_MARK_OPTIMIZER);
	assert_true(det.how.from_auto);
	assert_int_equal(sp_stepdet_anchor_name(&det), 0);
	/* the loop's launches and syncs decide nothing now */
	assert_int_equal(cuda_iteration(&step) & (SP_DET_BOUNDARY | SP_DET_LOCK | SP_DET_MISMATCH), 0);
	assert_true(feed(SP_TOK_OPTIM, "Adam#1", &o) & SP_DET_BOUNDARY);
	assert_int_equal(o.step, 2);
	sp_stepdet_free(&det);

	/* a window of automatic steps began first: no switch, said once */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	for (int i = 0; i < 12; i++)
		cuda_iteration(&step);
	sp_stepdet_no_switch(&det);
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o), SP_DET_NOSWITCH);
	assert_int_equal(feed(SP_TOK_SCALER, "GradScaler#1", &o), 0);
	assert_int_equal(det.kind, SP_MARK_AUTO);
	assert_true(cuda_iteration(&step) & SP_DET_BOUNDARY);
	sp_stepdet_free(&det);
}

static unsigned feed_captured(const char *name, struct sp_det_out *o)
{
	struct sp_token t = { .kind = SP_TOK_OPTIM, .flags = SP_TOKF_CAPTURED, .tid = 1, .name = sp_intern(name) };
	t.ts = now += 100000;
	sp_stepdet_feed(&det, &t, o);
	return o->what;
}

/* A training step captured into a CUDA graph (torch.cuda.graph with a capturable optimizer): kind =
 * auto took the warm-up's optimizer steps, then one ran inside the capture; the graph's replays never
 * call the hook, so the detector learns the launches' period again (steps numbered afresh) and never
 * takes the optimizer steps; once a window of them began it keeps them; kind = optimizer says so once. */
static void captured_step(void **state)
{
	(void)state;
	struct sp_det_out o;
	int64_t step = -1;
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	for (int i = 0; i < 3; i++)
		feed(SP_TOK_OPTIM, "Adam#1", &o); /* the warm-up, on a side stream */
	assert_int_equal(det.kind, SP_MARK_OPTIMIZER);
	assert_true(feed_captured("Adam#1", &o) & SP_DET_UNSWITCH);
	assert_true(o.what & SP_DET_WANTS);
	assert_int_equal(det.kind, SP_MARK_AUTO);
	assert_int_equal(det.how.from_auto, 0);
	assert_true(sp_stepdet_wants(&det) != 0);
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o) & (SP_DET_SWITCH | SP_DET_BOUNDARY), 0);
	unsigned all = 0;
	for (int i = 0; i < 12; i++)
		all |= cuda_iteration(&step);
	assert_true(all & SP_DET_LOCK);
	assert_int_equal(det.kind, SP_MARK_AUTO);
	sp_stepdet_free(&det);

	/* captured before the switch: never switches */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	assert_int_equal(feed_captured("Adam#1", &o) & SP_DET_SWITCH, 0);
	assert_int_equal(feed(SP_TOK_OPTIM, "Adam#1", &o) & SP_DET_SWITCH, 0);
	assert_int_equal(det.kind, SP_MARK_AUTO);
	sp_stepdet_free(&det);

	/* a window of the optimizer steps began: they stay */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	feed(SP_TOK_OPTIM, "Adam#1", &o);
	sp_stepdet_no_switch(&det);
	assert_int_equal(feed_captured("Adam#1", &o) & SP_DET_UNSWITCH, 0);
	assert_int_equal(det.kind, SP_MARK_OPTIMIZER);
	sp_stepdet_free(&det);

	/* kind = optimizer: said once, steps go on */
	assert_int_equal(sp_stepdet_init(&det, SP_MARK_OPTIMIZER, "", 1, NULL), 0);
	feed(SP_TOK_PYHOOK, "optimizer", &o);
	assert_true(feed_captured("Adam#1", &o) & SP_DET_CAPTURED);
	assert_int_equal(feed_captured("Adam#1", &o) & SP_DET_CAPTURED, 0);
	assert_int_equal(det.kind, SP_MARK_OPTIMIZER);
	sp_stepdet_free(&det);
}

/* An RL loop under kind = auto: the program made an optimizer (Optimizer.__init__'s PYCALL token), then
 * its rollout, a loop without training evidence, runs longer than defer_steps before the first optimizer
 * step: its steps are held (said once), not counted, and that step takes over. Without the token (or
 * with another function's, or without the optimizer hook in) they count from defer_steps on; with it,
 * from optim_defer_steps on. */
static void optimizer_made_defers(void **state)
{
	(void)state;
	struct sp_det_out o;
	int64_t step = -1;
	struct sp_det_tune t = sp_det_tune_default;
	t.optim_defer_steps = 45;
	for (int made = 0; made < 5; made++) {
		assert_int_equal(sp_stepdet_init_tuned(&det, SP_MARK_AUTO, "", 1, NULL, made == 3 ? &t : NULL), 0);
		if (made != 4)
			feed(SP_TOK_PYHOOK, "optimizer", &o);
		if (made)
			feed(SP_TOK_PYCALL, made == 2 ? "__main__:generate" : SP_STEPDET_OPTIM_MADE, &o);
		unsigned all = 0, held = 0;
		int64_t proven_at = -1;
		for (int i = 0; i < 60; i++) {
			unsigned w = cuda_iteration(&step);
			held += (w & SP_DET_HELD) != 0;
			if ((w & SP_DET_PROVEN) && proven_at < 0)
				proven_at = i;
			all |= w;
		}
		assert_true(all & SP_DET_LOCK);
		if (made == 1) {
			assert_int_equal(all & SP_DET_PROVEN, 0);
			assert_int_equal(held, 1);
		} else {
			assert_true(all & SP_DET_PROVEN);
			assert_int_equal(held, made == 3);
			assert_true(made == 3 ? proven_at >= 40 : proven_at < 30);
		}
		if (made != 4)
			assert_true(feed(SP_TOK_OPTIM, "AdamW#1", &o) & SP_DET_SWITCH);
		sp_stepdet_free(&det);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(optimizer_marker),
		cmocka_unit_test(python_marker),
		cmocka_unit_test(auto_switches),
		cmocka_unit_test(captured_step),
		cmocka_unit_test(optimizer_made_defers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
