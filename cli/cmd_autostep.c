/* SPDX-License-Identifier: MIT */
/* cmd_autostep.c - `stepprof autostep FILE [--json] [--check] [--no-lock] [--marker KIND:PATTERN]`:
 * replays a token stream recorded with STEPPROF_RECORD_TOKENS through the step detector
 * (decide/stepdet.h, the code the library runs) and prints what it decides and why; with the
 * recorded truth, compares its steps with the true iterations. */
#include <dlfcn.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "tokstream.h"
#include "windows.h"
#include "collector/base/intern.h"
#include "decide/stepdet.h"
#include "config/config.h"

/* One decision of the replay. */
struct decision {
	size_t index;          /* token index in the stream (TRUTH tokens included) */
	size_t pos;            /* where the step begins: before token pos */
	uint64_t ts;
	struct sp_det_out out;
	struct sp_det_how how; /* after the decision */
	int refuted;           /* a BOUNDARY whose step the detector later found to differ */
	int settled;           /* sp_stepdet_settled after the decision */
	int64_t sched;         /* the schedule's step for out.step (sp_stepdet_sched_step) */
	char *note;            /* sp_stepdet_regime_note at a LOCK or PROVEN, or NULL */
};

struct replay {
	struct decision *d;
	size_t n, cap;
	char undecided[600];   /* the detector's "undecided" line, if it said one */
	char at_end[600];      /* ... and at the end of the stream, if still learning */
	struct sp_det_how how; /* at the end */
	uint64_t steps;        /* boundaries */
};

/* The result of comparing with the truth. */
struct verdict {
	int have_truth;
	uint32_t regime;       /* the dominant regime (most boundaries) */
	size_t compared, matched, mismatched;
	size_t refuted;        /* boundaries of steps the detector itself refuted */
	size_t shifts;         /* re-locks after which the step numbers moved against the iterations */
	long long offset;      /* step number - true iteration, in the dominant regime */
	long long lock_iter;   /* true iteration during which the dominant regime locked */
	long long steps_after, iters_after;
	int locked;
	size_t loop_boundaries; /* boundaries from the first true iteration on (--no-lock: must be 0) */
	char why[300];         /* first disagreement */
};

const struct sp_cmd_spec sp_spec_autostep = {
	.name = "autostep",
	.fn = sp_cmd_autostep,
	.operands = "FILE",
	.complete = "FILE",
	.summary = "replay a recorded token stream (STEPPROF_RECORD_TOKENS) through step detection",
	.text = "  Replays a token stream recorded with STEPPROF_RECORD_TOKENS=FILE through the step detector\n"
		"  and prints each decision (lock, boundary, mismatch, unlock, re-lock) and the stream's\n"
		"  statistics. With a truth (STEPPROF_RECORD_TRUTH), compares the dominant regime's steps with\n"
		"  the true iterations.\n",
	.opt = (const struct sp_opt[]){
		{ "json", 'j', 0, NULL, "the same as one JSON object" },
		{ "check", 'c', 0, NULL, "exit 1 if the steps disagree with the truth (with --no-lock: if any step is found in the loop)" },
		{ "no-lock", 'n', 0, NULL, "the stream is one that must not lock (for --check)" },
		{ "marker", 'm', 0, "KIND:PATTERN", "replay an explicit marker (kernel, api, nccl, nvtx, python:module:qualname, or optimizer) instead of auto" },
		{ "windows", 'w', 0, NULL, "also replay the windows the schedule would record (--check: each step one true iteration)" },
		{ "set", 'E', 0, "NAME=VALUE", "schedule.KEY=VALUE: a [schedule] key of the replayed schedule (default: the built-in one); else one of the detector's tunables (repeatable; the library always runs the defaults)" },
		{ "tunables", 'L', 0, NULL, "list the tunables (name, default, range, stage, why, the test that covers it)" },
		{ "iterations", 'I', 0, "N", "replay only the stream's first N true iterations, as if the program had stopped there" },
		{ "skip-first", 's', 0, "N", NULL },
		{ "wait", 'W', 0, "N", NULL },
		{ "no-prefer", 'P', 0, NULL, "count every regime's steps, not only the training regime's" },
		{ "sparse", 'S', 0, "N", "check the launches of one step in N only (and of the windows), as the collector does" },
		{ "tokens", 't', 0, NULL, "print every token first (index, time since the previous, thread, kind, name)" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_autostep, f);
	return rc;
}

/* Every note the detector has to say now (sp_stepdet_regime_note), one a line, or NULL. */
static char *regime_notes(struct sp_stepdet *det)
{
	char note[600], all[2048] = "";
	size_t o = 0;
	while (sp_stepdet_regime_note(det, note, sizeof note) && o + 1 < sizeof all)
		o += (size_t)snprintf(all + o, sizeof all - o, "%s%s", o ? "\n" : "", note);
	return o ? sp_xstrdup(all) : NULL;
}

static void replay_run(const struct sp_tokstream *s, struct sp_stepdet *det, const struct sp_schedule *sch,
		       struct replay *r)
{
	for (size_t i = 0; i < s->n; i++) {
		struct sp_det_out o;
		sp_stepdet_feed(det, &s->tok[i], &o);
		/* as the library: once a window begins, kind = auto keeps its steps (stepdet_py.c) */
		if ((o.what & SP_DET_BOUNDARY) && det->kind == SP_MARK_AUTO &&
		    (sp_schedule_action(sch, sp_stepdet_sched_step(det, o.step)) == SP_ACT_RECORD ||
		     sp_schedule_action(sch, sp_stepdet_sched_step(det, o.step)) == SP_ACT_RECORD_AND_SAVE))
			sp_stepdet_no_switch(det);
		if (o.what & SP_DET_UNDECIDED)
			sp_stepdet_undecided(det, r->undecided, sizeof r->undecided);
		if (!(o.what & ~(unsigned)(SP_DET_WANTS | SP_DET_UNDECIDED)))
			continue;
		r->d = sp_xgrow(r->d, &r->cap, sizeof *r->d, r->n);
		struct decision *d = &r->d[r->n++];
		d->index = i;
		d->pos = o.what & SP_DET_AFTER ? i + 1 : i;
		d->ts = s->tok[i].ts;
		d->out = o;
		d->how = det->how;
		d->settled = sp_stepdet_settled(det);
		d->sched = sp_stepdet_sched_step(det, o.step);
		d->note = (o.what & (SP_DET_LOCK | SP_DET_PROVEN)) ? regime_notes(det) : NULL;
		r->steps += (o.what & SP_DET_BOUNDARY) != 0;
		/* refuted: the regime ended in it; an irregular step (the lock kept) is compared as any */
		for (size_t k = r->n - 1; (o.what & SP_DET_MISMATCH) && (o.what & SP_DET_UNLOCK) && k-- > 0;)
			if ((r->d[k].out.what & SP_DET_BOUNDARY) && r->d[k].out.step == o.bad_step) {
				r->d[k].refuted = 1;
				break;
			}
	}
	r->how = det->how;
	sp_stepdet_undecided(det, r->at_end, sizeof r->at_end);
}

/* True iteration of a step that begins before token pos: truths before pos, minus one. */
static long long iteration_at(const size_t *truth, size_t nt, size_t pos)
{
	size_t lo = 0, hi = nt;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (truth[m] < pos)
			lo = m + 1;
		else
			hi = m;
	}
	return (long long)lo - 1;
}

/* The regime with the most boundaries. */
static uint32_t dominant(const struct replay *r)
{
	uint64_t cnt[SP_DET_REGIMES + 1] = { 0 };
	uint32_t best = 0; /* explicit markers: regime 0 */
	for (size_t i = 0; i < r->n; i++)
		if ((r->d[i].out.what & SP_DET_BOUNDARY) && r->d[i].out.regime <= SP_DET_REGIMES)
			cnt[r->d[i].out.regime]++;
	for (uint32_t k = 0; k <= SP_DET_REGIMES; k++)
		if (cnt[k] > cnt[best])
			best = k;
	return best;
}

static void disagree(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void disagree(struct verdict *v, const char *fmt, ...)
{
	va_list ap;
	v->mismatched++;
	if (v->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof v->why, fmt, ap);
	va_end(ap);
}

/* Compares the dominant regime's boundaries with the truth: consecutive steps lie in consecutive
 * true iterations, the step number minus the iteration is the same throughout, and as many steps
 * follow the lock as true iterations. */
static void compare(const struct sp_tokstream *s, const struct replay *r, struct verdict *v)
{
	size_t *truth = NULL, nt = 0, cap = 0;
	memset(v, 0, sizeof *v);
	for (size_t i = 0; i < s->n; i++)
		if (s->tok[i].kind == SP_TOK_TRUTH) {
			truth = sp_xgrow(truth, &cap, sizeof *truth, nt);
			truth[nt++] = i;
		}
	v->have_truth = nt > 0;
	v->regime = dominant(r);
	v->lock_iter = -1;
	for (size_t i = 0; i < r->n; i++) {
		v->locked |= (r->d[i].out.what & SP_DET_LOCK) != 0;
		v->loop_boundaries += (r->d[i].out.what & SP_DET_BOUNDARY) && nt && r->d[i].pos > truth[0];
	}
	long long prev_step = 0, prev_iter = 0, first_iter = -1, last_iter = -1;
	int have_prev = 0, have_offset = 0, relocked = 0;
	for (size_t i = 0; i < r->n && nt; i++) {
		const struct decision *d = &r->d[i];
		if (d->out.regime != v->regime || !(d->out.what & (SP_DET_BOUNDARY | SP_DET_LOCK)))
			continue;
		if (d->refuted) { /* the detector said it differed: reported, not compared */
			v->refuted++;
			have_prev = 0;
			continue;
		}
		long long it = iteration_at(truth, nt, d->pos);
		if (d->out.what & SP_DET_LOCK) {
			if (v->lock_iter < 0)
				v->lock_iter = it;
			have_prev = 0; /* the locked step was not watched from its start */
			relocked = have_offset;
			continue;
		}
		if (first_iter < 0)
			first_iter = it;
		last_iter = it;
		v->steps_after++;
		if (!have_offset || relocked) {
			/* a re-lock numbers the regime's steps from what it saw since it learned again:
			 * iterations that another regime's steps covered are not counted (a shift) */
			v->shifts += relocked && d->out.step - it != v->offset;
			v->offset = d->out.step - it;
			have_offset = 1;
			relocked = 0;
		} else if (d->out.step - it != v->offset) {
			disagree(v, "step %lld begins in true iteration %lld (offset %lld before)",
				 (long long)d->out.step, it, v->offset);
		}
		if (have_prev && d->out.step == prev_step + 1) {
			v->compared++;
			if (it == prev_iter + 1)
				v->matched++;
			else
				disagree(v, "step %lld begins in true iteration %lld, its predecessor in %lld",
					 (long long)d->out.step, it, prev_iter);
		}
		have_prev = 1;
		prev_step = d->out.step;
		prev_iter = it;
	}
	v->iters_after = first_iter < 0 ? 0 : (long long)nt - first_iter;
	if (v->steps_after > v->iters_after)
		disagree(v, "%lld steps from the first boundary on, only %lld true iterations", v->steps_after,
			 v->iters_after);
	/* still locked on it at the end: its boundaries must go on to the last iterations */
	if (nt && v->steps_after && r->how.regime == v->regime && last_iter + 2 < (long long)nt)
		disagree(v, "boundaries stop at true iteration %lld of %lld", last_iter, (long long)nt);
	free(truth);
}

/* What a schedule would record: the collector's rule (windows.c) replayed on the decisions. */
struct windows {
	size_t steps;          /* recorded steps */
	long long *seen;       /* their step numbers (one recorded twice is wrong) */
	size_t nseen, capseen;
	size_t bad;            /* ... not one true iteration of the truth's regime */
	size_t minor;          /* boundaries in a regime that was not the preferred one (SP_DET_MINOR) */
	size_t at_exit;        /* the step open at the stream's end, cut there: not compared */
	char first[400];       /* the first recorded step, and the first bad one */
	char why[400];
};

/* Kernel and graph launches in tokens [a, b). */
static size_t launches_in(const struct sp_tokstream *s, size_t a, size_t b)
{
	size_t n = 0;
	for (size_t i = a; i < b && i < s->n; i++)
		n += s->tok[i].kind == SP_TOK_KERNEL || s->tok[i].kind == SP_TOK_GRAPH;
	return n;
}

/* Truth tokens in [a, b). */
static size_t truths_in(const size_t *truth, size_t nt, size_t a, size_t b)
{
	size_t n = 0;
	for (size_t i = 0; i < nt; i++)
		n += truth[i] >= a && truth[i] < b;
	return n;
}

/* Checks one recorded step [a, b) of regime `regime` (train: it showed training evidence) against
 * the truth (regime v->regime): it must hold as many launches as the true iteration it begins in (a
 * true iteration runs from one truth token to the next, wherever in the loop the program put its
 * marker: what an explicit marker would record; compare() has checked that consecutive steps of
 * the truth's regime begin in consecutive ones). A step of another regime is right only if that
 * regime trains and the step is exactly one true iteration: one truth inside it, the iteration's
 * launches (a training loop that changed a little between two locks, DDP's timing calls that
 * stop after ten iterations); an evaluation pass, or a step that straddles iterations, is not.
 * A step number recorded twice is wrong whatever it holds. The step open when the stream ends (the
 * program exited in it, or --iterations cut it) holds whatever came after the last iteration: if it
 * is of the truth's regime and only its launches differ, it is not compared (at_exit). */
static void window_step(const struct sp_tokstream *s, const size_t *truth, size_t nt, const struct verdict *v,
			struct windows *w, long long step, uint32_t regime, int train, int refuted, int at_exit,
			size_t a, size_t b)
{
	long long it = iteration_at(truth, nt, a);
	size_t got = launches_in(s, a, b), want = 0;
	const char *bad = NULL;
	if (it >= 0)
		want = launches_in(s, truth[it], (size_t)it + 1 < nt ? truth[it + 1] : s->n);
	int twice = 0;
	for (size_t i = 0; i < w->nseen; i++)
		twice |= w->seen[i] == step;
	w->seen = sp_xgrow(w->seen, &w->capseen, sizeof *w->seen, w->nseen);
	w->seen[w->nseen++] = step;
	if (refuted)
		bad = "refuted by the detector";
	else if (twice)
		bad = "recorded twice (a step number handed out again)";
	else if (regime != v->regime && (!train || truths_in(truth, nt, a, b) != 1 || it < 0 || got != want))
		bad = train ? "another regime's and not one true iteration" : "another regime's";
	else if ((it < 0 || got != want) && at_exit)
		w->at_exit++;
	else if (it < 0 || got != want)
		bad = "not one true iteration";
	w->steps++;
	if (!w->first[0])
		snprintf(w->first, sizeof w->first, "step %lld: regime %u, %zu launches, true iteration %lld holds %zu",
			 step, regime, got, it, want);
	if (bad && !w->bad++)
		snprintf(w->why, sizeof w->why,
			 "recorded step %lld is %s: regime %u (the truth's: %u), %zu launches; "
			 "true iteration %lld holds %zu",
			 step, bad, regime, v->regime, got, it, want);
}

/* Replays the collector's windows for schedule sch on the decisions and checks every recorded
 * step against the truth. */
static void windows_check(const struct sp_tokstream *s, const struct replay *r, const struct verdict *v,
			  const struct sp_schedule *sch, struct windows *w)
{
	size_t *truth = NULL, nt = 0, cap = 0, open_at = 0;
	long long step = 0;
	uint32_t regime = 0;
	int open = 0, record = 0, done = 0, refuted = 0, train = 0;
	memset(w, 0, sizeof *w);
	for (size_t i = 0; i < s->n; i++)
		if (s->tok[i].kind == SP_TOK_TRUTH) {
			truth = sp_xgrow(truth, &cap, sizeof *truth, nt);
			truth[nt++] = i;
		}
	for (size_t i = 0; i < r->n && !done; i++) {
		const struct decision *d = &r->d[i];
		unsigned what = d->out.what;
		w->minor += (what & SP_DET_BOUNDARY) && (what & SP_DET_MINOR);
		if ((what & (SP_DET_END | SP_DET_BOUNDARY)) && open && record)
			window_step(s, truth, nt, v, w, step, regime, train,
				    refuted || ((what & SP_DET_MISMATCH) && (what & SP_DET_UNLOCK)), 0, open_at,
				    d->pos);
		if (what & (SP_DET_END | SP_DET_BOUNDARY))
			open = 0;
		if (what & (SP_DET_LOCK | SP_DET_BOUNDARY)) {
			open = 1;
			open_at = d->pos;
			step = d->out.step;
			regime = d->out.regime;
			train = d->how.train;
			refuted = d->refuted;
			enum sp_action act = what & SP_DET_BOUNDARY ? sp_schedule_action(sch, d->sched) : SP_ACT_NONE;
			record = act == SP_ACT_RECORD || act == SP_ACT_RECORD_AND_SAVE;
			done = (what & SP_DET_BOUNDARY) && act == SP_ACT_NONE && d->sched >= 0 &&
			       sp_schedule_done(sch, d->sched) && d->settled;
		}
	}
	if (open && record && !done)
		window_step(s, truth, nt, v, w, step, regime, train, 0, 1, open_at, s->n);
	free(truth);
	free(w->seen);
	w->seen = NULL;
}

static const char *anchor_name(const struct sp_det_how *h)
{
	const char *n = sp_intern_lookup(h->anchor & ~SP_AUTOSTEP_FLAGS);
	return n ? n : "?";
}

static void print_decision(const struct decision *d, uint64_t t0, FILE *out)
{
	double t = (double)(d->ts - t0) / 1e9;
	unsigned w = d->out.what;
	if ((w & SP_DET_MISMATCH) && (w & SP_DET_UNLOCK))
		fprintf(out, "  token %-9zu %10.6f s  step %lld differed from the period (not %u launches)\n", d->index,
			t, (long long)d->out.bad_step, d->how.launches);
	else if (w & SP_DET_MISMATCH)
		fprintf(out,
			"  token %-9zu %10.6f s  step %lld launched a few kernels more than the period's %u: kept as "
			"an irregular step\n",
			d->index, t, (long long)d->out.bad_step, d->how.launches);
	if (w & SP_DET_UNLOCK)
		fprintf(out, "  token %-9zu %10.6f s  unlock: the regime ended, learning again\n", d->index, t);
	if (w & SP_DET_LOCK)
		fprintf(out,
			"  token %-9zu %10.6f s  %s regime %u: period %u tokens (%u launches), boundary %s '%s' "
			"every %u, proven by %u copies%s; step %lld open\n",
			d->index, t, w & SP_DET_RELOCK ? "re-lock" : "lock", d->out.regime, d->how.period,
			d->how.launches, d->how.after ? "after" : "before", anchor_name(&d->how), d->how.every,
			d->how.confidence,
			d->how.blocks > 1 ? " (one of the iterations between two host synchronisations)" : "",
			(long long)d->out.step);
	for (const char *nt = d->note, *e; nt && *nt; nt = *e ? e + 1 : e) {
		e = strchr(nt, '\n');
		e = e ? e : nt + strlen(nt);
		fprintf(out, "  token %-9zu %10.6f s  stepprof: %.*s\n", d->index, t, (int)(e - nt), nt);
	}
	if (w & SP_DET_BOUNDARY)
		fprintf(out, "  token %-9zu %10.6f s  step %lld begins%s (regime %u%s)\n", d->index, t,
			(long long)d->out.step, w & SP_DET_AFTER ? " after this call" : "", d->out.regime,
			w & SP_DET_MINOR ? ", not counted by the schedule" : "");
	if ((w & SP_DET_END) && !(w & SP_DET_UNLOCK))
		fprintf(out, "  token %-9zu %10.6f s  step ends\n", d->index, t);
	if (w & SP_DET_SWITCH)
		fprintf(out, "  token %-9zu %10.6f s  the program's optimizer steps from here (kind = auto)\n",
			d->index, t);
	if (w & SP_DET_HELD)
		fprintf(out,
			"  token %-9zu %10.6f s  a loop without training evidence, an optimizer made but not stepped: "
			"its steps wait\n",
			d->index, t);
	if (w & SP_DET_NOSWITCH)
		fprintf(out,
			"  token %-9zu %10.6f s  optimizer steps came after a window began: steps stay automatic\n",
			d->index, t);
	if (w & SP_DET_PYRULE) {
		struct sp_pysteps_how h = { .rule = (int)d->how.confidence,
					    .period = d->how.period,
					    .optimizers = d->how.launches };
		char say[300];
		fprintf(out, "  token %-9zu %10.6f s  %s\n", d->index, t,
			sp_pysteps_say(&h, anchor_name(&d->how), say, sizeof say));
	}
}

/* One line on the windows (text) or one field (json). */
static void print_windows(const struct windows *w, long long skip, int json, FILE *out)
{
	if (json) {
		fprintf(out,
			",\"windows\":{\"skip_first\":%lld,\"steps\":%zu,\"bad\":%zu,\"at_exit\":%zu,"
			"\"minor_boundaries\":%zu,\"first\":",
			skip, w->steps, w->bad, w->at_exit, w->minor);
		sp_tokstream_json_str(out, w->first);
		fputs(",\"why\":", out);
		sp_tokstream_json_str(out, w->why);
		fputc('}', out);
		return;
	}
	fprintf(out,
		"windows (skip_first %lld): %zu recorded step%s, %zu not one true iteration (of the truth's regime, or "
		"of a training regime) or recorded twice%s%s; %s"
		"%zu boundar%s in a regime that was not the preferred one%s%s\n",
		skip, w->steps, w->steps == 1 ? "" : "s", w->bad, w->bad ? ": first: " : "", w->why,
		w->at_exit ? "the last, cut by the stream's end (the step the program exited in), not compared; " : "",
		w->minor, w->minor == 1 ? "y" : "ies", w->first[0] ? "; first recorded " : "", w->first);
}

/* The tunables table (decide/tunables.h): name, default, range, stage, why, test. */
static void print_tunables(FILE *out)
{
	fprintf(out, "# the step detector's tunables (decide/tunables.h): NAME DEFAULT [MIN-MAX] STAGE: why (test)\n");
	for (size_t i = 0; i < sp_det_ntunables; i++) {
		const struct sp_det_tunable *u = &sp_det_tunables[i];
		fprintf(out, "%s %llu [%llu-%llu] %s: %s (%s)\n", u->name, (unsigned long long)u->def,
			(unsigned long long)u->min, (unsigned long long)u->max, u->stage, u->why, u->test);
	}
}

/* The tunables of t that differ from the defaults, as "NAME=VALUE, ..." (json: "NAME":VALUE,...)
 * into buf ("" if none). This function can't fail (it truncates). */
static void tunables_changed(const struct sp_det_tune *t, int json, char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sp_det_ntunables && o + 1 < n; i++) {
		const struct sp_det_tunable *u = &sp_det_tunables[i];
		uint64_t v;
		memcpy(&v, (const char *)t + u->off, sizeof v);
		if (v != u->def)
			o += (size_t)snprintf(buf + o, n - o, json ? "%s\"%s\":%llu" : "%s%s=%llu", o ? ", " : "",
					      u->name, (unsigned long long)v);
	}
}

static void print_text(const struct sp_tokstream *s, const struct replay *r, const struct verdict *v,
		       const struct sp_det_tune *t, FILE *out)
{
	uint64_t t0 = s->n ? s->tok[0].ts : 0;
	char set[1024];
	tunables_changed(t, 0, set, sizeof set);
	sp_tokstream_stats(s, out, 0);
	fprintf(out, "replay (%s%s%s):\n", sp_marker_kind_name(r->how.marker_kind), set[0] ? "; tunables: " : "", set);
	for (size_t i = 0; i < r->n; i++)
		print_decision(&r->d[i], t0, out);
	if (r->undecided[0])
		fprintf(out, "stepprof: %s\n", r->undecided);
	if (r->at_end[0])
		fprintf(out, "at the end: %s\n", r->at_end);
	fprintf(out, "summary: %llu steps, %u re-lock%s, %u counted step%s that differed\n",
		(unsigned long long)r->steps, r->how.relocks, r->how.relocks == 1 ? "" : "s", r->how.mismatches,
		r->how.mismatches == 1 ? "" : "s");
	if (!v->have_truth) {
		fprintf(out, "truth: none in the stream: nothing to compare\n");
		return;
	}
	fprintf(out,
		"truth: dominant regime %u: %lld steps from its first boundary, %lld true iterations; step number "
		"- true iteration = %lld; locked during true iteration %lld; %zu consecutive steps compared: %zu "
		"match, "
		"%zu disagreement%s%s%s; %zu refuted by the detector; numbering shifted at %zu re-lock%s\n",
		v->regime, v->steps_after, v->iters_after, v->offset, v->lock_iter, v->compared, v->matched,
		v->mismatched, v->mismatched == 1 ? "" : "s", v->why[0] ? ": first: " : "", v->why, v->refuted,
		v->shifts, v->shifts == 1 ? "" : "s");
}

static void print_json(const struct sp_tokstream *s, const struct replay *r, const struct verdict *v,
		       const struct windows *w, long long skip, int ok, const struct sp_det_tune *t, FILE *out)
{
	char set[2048];
	tunables_changed(t, 1, set, sizeof set);
	fputc('{', out);
	sp_tokstream_stats(s, out, 1);
	fprintf(out, ",\"marker\":\"%s\",\"tunables\":{%s},\"decisions\":[", sp_marker_kind_name(r->how.marker_kind),
		set);
	for (size_t i = 0; i < r->n; i++) {
		const struct decision *d = &r->d[i];
		fprintf(out,
			"%s{\"token\":%zu,\"t_ns\":%llu,\"what\":%u,\"lock\":%d,\"relock\":%d,\"unlock\":%d,"
			"\"boundary\":%d,\"after\":%d,\"mismatch\":%d,\"step\":%lld,\"bad_step\":%lld,\"regime\":%u,"
			"\"period\":%u,"
			"\"launches\":%u,\"every\":%u,\"anchor\":",
			i ? "," : "", d->index, (unsigned long long)(d->ts - s->tok[0].ts), d->out.what,
			!!(d->out.what & SP_DET_LOCK), !!(d->out.what & SP_DET_RELOCK), !!(d->out.what & SP_DET_UNLOCK),
			!!(d->out.what & SP_DET_BOUNDARY), !!(d->out.what & SP_DET_AFTER),
			!!(d->out.what & SP_DET_MISMATCH),
			/* step: the one that begins (a boundary, a lock), else the refuted one, as before;
			 * bad_step: the one that differed (a mismatch), else -1 */
			(long long)(d->out.what & SP_DET_MISMATCH && !(d->out.what & (SP_DET_BOUNDARY | SP_DET_LOCK))
					    ? d->out.bad_step
					    : d->out.step),
			(long long)(d->out.what & SP_DET_MISMATCH ? d->out.bad_step : -1), d->out.regime, d->how.period,
			d->how.launches, d->how.every);
		sp_tokstream_json_str(out, anchor_name(&d->how));
		fputc('}', out);
	}
	fprintf(out, "],\"steps\":%llu,\"relocks\":%u,\"mismatches\":%u,\"undecided\":", (unsigned long long)r->steps,
		r->how.relocks, r->how.mismatches);
	sp_tokstream_json_str(out, r->undecided[0] ? r->undecided : r->at_end);
	fprintf(out,
		",\"truth\":{\"present\":%d,\"regime\":%u,\"steps\":%lld,\"iterations\":%lld,\"offset\":%lld,"
		"\"lock_iteration\":%lld,\"compared\":%zu,\"matched\":%zu,\"mismatched\":%zu,\"shifts\":%zu,\"first\":",
		v->have_truth, v->regime, v->steps_after, v->iters_after, v->offset, v->lock_iter, v->compared,
		v->matched, v->mismatched, v->shifts);
	sp_tokstream_json_str(out, v->why);
	fputc('}', out);
	if (w)
		print_windows(w, skip, 1, out);
	fprintf(out, ",\"check\":\"%s\"}\n", ok ? "ok" : "disagrees");
}

/* Every token, one a line: index, time since the previous one, thread, kind, flags, name. */
static void print_tokens(const struct sp_tokstream *s, FILE *out)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct sp_token *t = &s->tok[i];
		const char *n = t->name ? sp_intern_lookup(t->name) : "";
		fprintf(out, "%zu +%lluus tid=%u %s%s%s %.160s\n", i,
			(unsigned long long)(i ? (t->ts - s->tok[i - 1].ts) / 1000 : 0), t->tid,
			sp_tok_kind_name(t->kind), t->flags & SP_TOKF_SYNC ? " sync" : "",
			t->flags & SP_TOKF_DRIVER ? " driver" : "", n ? n : "?");
	}
}

/* The command line of `stepprof autostep`. */
struct args {
	int json, check, nolock, tokens, wins, noprefer, kind, tunables;
	long long skip, wait, sparse, iterations; /* wait, iterations: -1 unset */
	const char *pattern;
	struct sp_det_tune tune;                  /* the defaults, changed by --set NAME=VALUE */
	const char *sets[64];                     /* --set schedule.KEY=VALUE, in order */
	int nsets;
};

/* --check's verdict on stderr (nothing without --check, or when the replay agrees). */
static void report_verdict(const char *file, const struct args *a, const struct verdict *v, const struct windows *w,
			   int ok)
{
	if (a->check && !ok)
		fprintf(stderr, "stepprof autostep: %s: %s\n", file,
			a->nolock       ? "the detector found steps in a loop that must not lock"
			: v->steps_after ? v->why
					 : "no step found");
	else if (a->check && w && w->bad)
		fprintf(stderr, "stepprof autostep: %s: the default schedule's windows (skip_first %lld): %s\n", file,
			a->skip, w->why);
}

/* Keeps the tokens before the (n + 1)-th truth token: the stream of a program that ran n
 * iterations (its tail after the loop is lost). A stream without that many truths stays whole. */
static void keep_iterations(struct sp_tokstream *s, size_t n)
{
	size_t seen = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->tok[i].kind == SP_TOK_TRUTH && seen++ == n) {
			s->n = i;
			s->truth = n;
			return;
		}
}

/* --marker KIND:PATTERN into kind and pattern. Returns 0 or -1. */
static int parse_marker(const char *spec, int *kind, const char **pattern)
{
	static const struct {
		const char *name;
		int kind;
	} kinds[] = { { "kernel", SP_MARK_KERNEL },
		      { "api", SP_MARK_API },
		      { "nccl", SP_MARK_NCCL },
		      { "nvtx", SP_MARK_NVTX },
		      { "python", SP_MARK_PYTHON } };
	if (!strcmp(spec, "optimizer") || !strcmp(spec, "optimizer:")) {
		*kind = SP_MARK_OPTIMIZER;
		*pattern = "";
		return 0;
	}
	const char *c = strchr(spec, ':');
	if (c && !strncmp(spec, "python:", 7)) /* module:qualname holds a ':' of its own */
		c = spec + 6;
	for (size_t i = 0; c && c[1] && i < sizeof kinds / sizeof *kinds; i++)
		if ((size_t)(c - spec) == strlen(kinds[i].name) && !strncmp(spec, kinds[i].name, (size_t)(c - spec))) {
			*kind = kinds[i].kind;
			*pattern = c + 1;
			return 0;
		}
	return -1;
}

/* Parses the options into *a. Returns 0, 1 (--help or --tunables printed: exit 0), or 2 (usage). */
static int parse_args(int argc, char **argv, struct args *a)
{
	int c;
	char *end, err[4096];
	*a = (struct args){ .kind = SP_MARK_AUTO, .wait = -1, .iterations = -1, .pattern = "",
			    .tune = sp_det_tune_default };
	optind = 0;
	while ((c = sp_opts_next(&sp_spec_autostep, argc, argv)) != -1) {
		if (c == 'h')
			return usage(stdout, 0), 1;
		if (c == 'j' || c == 'c' || c == 'n' || c == 't' || c == 'w' || c == 'P' || c == 'L') {
			*(c == 'j'   ? &a->json
			  : c == 'c' ? &a->check
			  : c == 'n' ? &a->nolock
			  : c == 'w' ? &a->wins
			  : c == 'P' ? &a->noprefer
			  : c == 'L' ? &a->tunables
				     : &a->tokens) = 1;
		} else if (c == 's' || c == 'W' || c == 'S' || c == 'I') {
			long long *num = c == 's'   ? &a->skip
					 : c == 'W' ? &a->wait
					 : c == 'S' ? &a->sparse
						    : &a->iterations;
			*num = strtoll(optarg, &end, 10);
			if (*end || end == optarg || *num < 0 || *num > 1000000) {
				fprintf(stderr, "stepprof autostep: --%s wants a number from 0 to 1000000, not '%s'\n",
					c == 's'   ? "skip-first"
					: c == 'W' ? "wait"
					: c == 'S' ? "sparse"
						   : "iterations",
					optarg);
				return usage(stderr, 2);
			}
		} else if (c == 'E' && !strncmp(optarg, "schedule.", 9)) {
			if (a->nsets == 64) {
				fprintf(stderr, "stepprof autostep: at most 64 --set schedule.KEY=VALUE\n");
				return 2;
			}
			a->sets[a->nsets++] = optarg;
		} else if (c == 'm' && parse_marker(optarg, &a->kind, &a->pattern) < 0) {
			fprintf(stderr,
				"stepprof autostep: --marker wants KIND:PATTERN (kernel, api, nccl, nvtx, python) "
				"or optimizer\n");
			return usage(stderr, 2);
		} else if (c == 'E' && sp_det_tune_set(&a->tune, optarg, err, sizeof err) < 0) {
			fprintf(stderr, "stepprof autostep: --set %s: %s\n", optarg, err);
			return 2;
		} else if (c != 'm' && c != 'E') {
			return usage(stderr, 2);
		}
	}
	if (a->tunables)
		return print_tunables(stdout), 1;
	return sp_cli_operands("autostep", argc, argv, 1, 1) ? usage(stderr, 2) : 0;
}

/* The replayed schedule: the built-in one with --skip-first, --wait and --set schedule.KEY=VALUE.
 * Returns 0, or 2 with the errors printed. */
static int replay_schedule(const struct args *a, struct sp_config *cfg)
{
	struct sp_cfg_errors errs = { 0 };
	sp_cfg_defaults(cfg);
	cfg->schedule.skip_first = a->skip;
	if (a->wait >= 0)
		cfg->schedule.wait = a->wait;
	for (int i = 0; i < a->nsets; i++) {
		char typed[300], sec[64], key[64];
		const char *value;
		snprintf(typed, sizeof typed, "--set %s", a->sets[i]);
		if (sp_cli_set_split(typed, "schedule", sec, sizeof sec, key, sizeof key, &value) < 0) {
			fprintf(stderr, "stepprof autostep: %s: expected schedule.KEY=VALUE\n", typed);
			return 2;
		}
		sp_cfg_set(cfg, sec, key, value, typed, 0, &errs);
	}
	if (sp_cfg_finish(cfg, &errs) || errs.count) {
		sp_cli_config_errors("autostep", &errs);
		return 2;
	}
	return 0;
}

/* Exit status: 0 printed (and, with --check, agrees); 1 unreadable file, or --check disagrees; 2 usage. */
int sp_cmd_autostep(int argc, char **argv)
{
	char err[512];
	struct sp_tokstream s;
	static struct args a;
	static struct sp_config cfg;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (replay_schedule(&a, &cfg))
		return 2;
	a.skip = cfg.schedule.skip_first;
	if (sp_tokstream_load(&s, argv[optind], err, sizeof err) < 0) {
		fprintf(stderr, "stepprof autostep: %s\n", err);
		return 1;
	}
	if (a.iterations >= 0)
		keep_iterations(&s, (size_t)a.iterations);
	struct sp_stepdet *det = calloc(1, sizeof *det);
	struct replay r = { 0 };
	struct verdict v;
	if (!det || sp_stepdet_init_tuned(det, a.kind, a.pattern, 1,
					  (char *(*)(const char *, char *, size_t *, int *))dlsym(RTLD_DEFAULT,
												  "__cxa_demangle"),
					  &a.tune) < 0)
		sp_oom();
	det->no_prefer = a.noprefer;
	sp_stepdet_schedule(det, &cfg.schedule); /* as the library does (collector/phases.c) */
	sp_stepdet_sparse(det, (uint32_t)a.sparse, &cfg.schedule);
	if (a.tokens)
		print_tokens(&s, stdout);
	replay_run(&s, det, &cfg.schedule, &r);
	compare(&s, &r, &v);
	/* --no-lock: the loop (from the first true iteration on; without truth, the whole stream)
	 * must get no step */
	int ok = a.nolock ? (v.have_truth ? !v.loop_boundaries : !v.locked)
			  : !v.mismatched && (!v.have_truth || v.steps_after > 0);
	struct windows w;
	if (a.wins)
		windows_check(&s, &r, &v, &cfg.schedule, &w);
	if (a.json)
		print_json(&s, &r, &v, a.wins ? &w : NULL, a.skip, ok && (!a.wins || !w.bad), &a.tune, stdout);
	else
		print_text(&s, &r, &v, &a.tune, stdout);
	if (a.wins && !a.json)
		print_windows(&w, a.skip, 0, stdout);
	report_verdict(argv[optind], &a, &v, a.wins ? &w : NULL, ok);
	ok &= !a.wins || !w.bad;
	sp_stepdet_free(det);
	free(det);
	for (size_t i = 0; i < r.n; i++)
		free(r.d[i].note);
	free(r.d);
	sp_tokstream_free(&s);
	return a.check && !ok;
}
