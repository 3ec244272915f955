/* SPDX-License-Identifier: MIT */
/* stepdet.c - the step detector's front (stepdet.h): explicit markers count matching tokens
 * against `every`; automatic detection turns tokens into the learner's (period.c), watches the
 * anchor once locked (regime.c numbers the steps, stepcheck.c checks them) and says what it wants
 * to see. docs/STEPS.md, "Automatic step detection". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fnmatch.h>
#include "stepdet_int.h"
#include "collector/base/intern.h"
#include "config/config.h"

#define LEARN_WANTS (SP_WANT_LAUNCH | SP_WANT_API | SP_WANT_GRAPH | SP_WANT_NVTX | SP_WANT_NCCL)

static int glob_match(const char *pat, const char *s)
{
	return s && fnmatch(pat, s, 0) == 0;
}

int sp_name_matches(uint32_t id, const char *pat, uint8_t *cache,
		    char *(*demangle)(const char *, char *, size_t *, int *))
{
	if (id < SP_DET_MATCH_CACHE && cache[id])
		return cache[id] == 2;
	const char *raw = sp_intern_lookup(id);
	int ok = glob_match(pat, raw);
	if (!ok && raw && demangle) {
		int st = 0;
		char *dm = demangle(raw, NULL, NULL, &st);
		if (dm && st == 0) {
			ok = glob_match(pat, dm);
			if (!ok) {
				char *p = strchr(dm, '('), *sp;
				if (p)
					*p = 0;
				sp = strrchr(dm, ' ');
				ok = glob_match(pat, sp ? sp + 1 : dm);
			}
		}
		free(dm);
	}
	if (id < SP_DET_MATCH_CACHE)
		cache[id] = ok ? 2 : 1;
	return ok;
}

int sp_stepdet_matches(struct sp_stepdet *d, uint32_t id)
{
	return sp_name_matches(id, d->pattern, d->match, d->demangle);
}

/* s with digit runs folded to '#' after prefix, into buf[n]. This function can't fail. */
static void fold_digits(const char *prefix, const char *s, char *buf, size_t n)
{
	size_t o = (size_t)snprintf(buf, n, "%s", prefix);
	for (; s && *s && o + 1 < n; s++) {
		if (*s >= '0' && *s <= '9') {
			while (s[1] >= '0' && s[1] <= '9')
				s++;
			buf[o++] = '#';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o < n ? o : n - 1] = 0;
}

uint32_t sp_stepdet_nvtx_name(const char *msg)
{
	char buf[160];
	fold_digits("", msg, buf, sizeof buf);
	return sp_intern(buf);
}

/* The learner's token for an NVTX message: "nvtx:" and the message with digit runs folded to
 * '#', so that "step 17" and "step 18" are one token. */
static uint32_t nvtx_token(struct sp_stepdet *d, uint32_t msg)
{
	char buf[170];
	unsigned slot = msg & (SP_DET_NVTX_SLOTS - 1);
	if (d->learn.nvtx[slot].msg == msg)
		return d->learn.nvtx[slot].tok;
	fold_digits("nvtx:", sp_intern_lookup(msg), buf, sizeof buf);
	d->learn.nvtx[slot].msg = msg;
	d->learn.nvtx[slot].tok = sp_intern(buf);
	return d->learn.nvtx[slot].tok;
}

/* The learner's token for t (name and autostep flags), or 0 if t is not one. */
static uint32_t learn_token(struct sp_stepdet *d, const struct sp_token *t)
{
	switch (t->kind) {
	case SP_TOK_KERNEL:
		return t->name | SP_AUTOSTEP_KERNEL;
	case SP_TOK_GRAPH:
		return t->name | SP_AUTOSTEP_KERNEL | SP_AUTOSTEP_GRAPH;
	case SP_TOK_API:
		return t->name | (t->flags & SP_TOKF_SYNC ? SP_AUTOSTEP_SYNC : 0);
	case SP_TOK_NCCL:
		return t->name;
	case SP_TOK_NVTX_PUSH:
		/* a range with a message; pops and unnamed ranges say nothing the pushes do not (XLA
		 * pushes tens of thousands of unnamed ranges from its compiler threads) */
		return t->name ? nvtx_token(d, t->name) : 0;
	}
	return 0;
}

static unsigned want_of(const struct sp_token *t)
{
	switch (t->kind) {
	case SP_TOK_KERNEL:
		return SP_WANT_LAUNCH;
	case SP_TOK_GRAPH:
		return SP_WANT_GRAPH;
	case SP_TOK_API:
		return SP_WANT_API;
	case SP_TOK_NCCL:
		return SP_WANT_NCCL;
	default:
		return SP_WANT_NVTX;
	}
}

/* 1 if the caller, enabling what sp_stepdet_wants says, would have delivered t. */
static int wanted(const struct sp_stepdet *d, const struct sp_token *t)
{
	if (d->wants & want_of(t))
		return 1;
	return (d->wants & SP_WANT_ANCHOR) && (t->kind == SP_TOK_API || t->kind == SP_TOK_GRAPH) &&
	       t->name == (d->how.anchor & ~SP_AUTOSTEP_FLAGS);
}

/* Sets the wants to w and flags the change in out. */
static void set_wants(struct sp_stepdet *d, unsigned w, struct sp_det_out *out)
{
	if (w != d->wants)
		out->what |= SP_DET_WANTS;
	d->wants = w;
}

void sp_det_watch(struct sp_stepdet *d, struct sp_det_out *out)
{
	/* the anchor, plus launches while a step is counted or a probe asks for them */
	uint32_t a = d->how.anchor;
	unsigned w = a & SP_AUTOSTEP_KERNEL ? SP_WANT_LAUNCH | SP_WANT_GRAPH : 0;
	if (!(a & SP_AUTOSTEP_KERNEL)) {
		const char *n = sp_intern_lookup(a & ~SP_AUTOSTEP_FLAGS);
		w |= n && !strncmp(n, "nvtx:", 5)  ? SP_WANT_NVTX
		     : n && !strncmp(n, "nccl", 4) ? SP_WANT_NCCL
						   : SP_WANT_ANCHOR;
	}
	if (d->check.counting || d->check.probe)
		w |= SP_WANT_LAUNCH | SP_WANT_GRAPH;
	set_wants(d, w, out);
}

void sp_det_start_learning(struct sp_stepdet *d, struct sp_det_out *out)
{
	d->learning = 1;
	d->learn.undecided_at = d->learn.tokens = 0;
	d->regimes.cur = 0;
	d->how.regime = 0;
	d->check.counting = 0;
	sp_autostep_reset(&d->a);
	set_wants(d, LEARN_WANTS, out);
}

int sp_stepdet_init_tuned(struct sp_stepdet *d, int kind, const char *pattern, int every,
			  char *(*demangle)(const char *, char *, size_t *, int *), const struct sp_det_tune *t)
{
	struct sp_det_out ignore = { 0 };
	memset(d, 0, sizeof *d);
	d->kind = kind;
	snprintf(d->pattern, sizeof d->pattern, "%s", pattern ? pattern : "");
	d->every = every >= 1 ? (uint32_t)every : 1;
	d->demangle = demangle;
	d->tune = t ? t : &sp_det_tune_default;
	d->step = -1;
	d->check.irr_step = INT64_MIN;
	d->how.marker_kind = kind;
	d->how.every = d->every;
	d->learn.nvtx_pop = sp_intern("nvtx:pop");
	sp_pysteps_init(&d->py);
	if (kind != SP_MARK_AUTO) {
		/* optimizer and python markers need nothing from CUPTI: the Python bridge brings them */
		d->wants = kind == SP_MARK_KERNEL                                ? SP_WANT_LAUNCH
			   : kind == SP_MARK_NVTX                                ? SP_WANT_NVTX
			   : kind == SP_MARK_NCCL                                ? SP_WANT_NCCL
			   : kind == SP_MARK_OPTIMIZER || kind == SP_MARK_PYTHON ? 0
										 : SP_WANT_MARKER;
		return 0;
	}
	if (sp_autostep_init_tuned(&d->a, d->tune) < 0)
		return -1;
	sp_det_start_learning(d, &ignore);
	return 0;
}

int sp_stepdet_init(struct sp_stepdet *d, int kind, const char *pattern, int every,
		    char *(*demangle)(const char *, char *, size_t *, int *))
{
	return sp_stepdet_init_tuned(d, kind, pattern, every, demangle, NULL);
}

void sp_stepdet_free(struct sp_stepdet *d)
{
	sp_autostep_free(&d->a);
}

int sp_stepdet_may_try(const struct sp_stepdet *d, const struct sp_token *t)
{
	/* only a graph launch may bring an attempt forward: asking for every token would time them all */
	return d->learning && sp_autostep_due(&d->a, t->kind == SP_TOK_GRAPH, t->ts);
}

void sp_stepdet_attempt_took(struct sp_stepdet *d, uint64_t ns)
{
	if (d->learning)
		sp_autostep_attempt_took(&d->a, ns);
}

unsigned sp_stepdet_wants(const struct sp_stepdet *d)
{
	return d->wants;
}

uint32_t sp_stepdet_anchor_name(const struct sp_stepdet *d)
{
	return d->kind == SP_MARK_AUTO && !d->learning ? d->how.anchor & ~SP_AUTOSTEP_FLAGS : 0;
}

void sp_det_boundary(struct sp_stepdet *d, uint64_t ts, unsigned flags, struct sp_det_out *out)
{
	d->step++;
	sp_det_hand_out(d);
	d->step_open = 1;
	d->step_t0 = ts;
	out->what |= SP_DET_BOUNDARY | flags | (sp_det_minor(d) ? SP_DET_MINOR : 0);
	out->step = d->step;
	out->regime = d->how.regime;
}

/* An explicit marker occurrence, counted against every. */
static void marker_hit(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	if (d->hits++ % d->every == 0)
		sp_det_boundary(d, t->ts, 0, out);
}

/* A profiler_range marker call: a Start begins a step, the matching Stop ends it. */
static void range_call(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	const char *n = sp_intern_lookup(t->name);
	if (n && strstr(n, "Stop")) {
		if (++d->range_stops % d->every == 0 && d->step_open) {
			d->step_open = 0;
			out->what |= SP_DET_END;
		}
	} else if (n && strstr(n, "Start") && d->range_starts++ % d->every == 0) {
		sp_det_boundary(d, t->ts, 0, out);
	}
}

/* 1 if thread tid has launched a kernel or graph (remembering it if `launch`). Beyond
 * SP_DET_LAUNCHERS such threads every thread counts as one. This function can't fail. */
static int launcher(struct sp_stepdet *d, uint32_t tid, int launch)
{
	for (unsigned i = 0; i < SP_DET_LAUNCHERS; i++) {
		if (d->learn.launchers[i] == tid + 1)
			return 1;
		if (!d->learn.launchers[i]) {
			if (launch)
				d->learn.launchers[i] = tid + 1;
			return launch;
		}
	}
	return 1;
}

static void auto_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	int launch = t->kind == SP_TOK_KERNEL || t->kind == SP_TOK_GRAPH;
	/* a copy or a set from a thread that launches no work is not the loop's structure (JAX's
	 * batch-feeding threads interleave theirs differently in each iteration) */
	if (!launcher(d, t->tid, launch) && t->kind == SP_TOK_API && !(t->flags & SP_TOKF_SYNC))
		return;
	uint32_t tok = learn_token(d, t);
	if (!tok || !wanted(d, t))
		return; /* not a token, or one the detector would not have been shown */
	if (d->learning) {
		d->learn.tokens++;
		if (sp_autostep_feed(&d->a, tok, t->ts))
			sp_det_lock(d, t, out);
		else if (d->learn.tokens >= d->learn.undecided_at + d->tune->undecided_tokens && !d->learn.reported) {
			d->learn.undecided_at = d->learn.tokens;
			d->learn.reported = 1;
			out->what |= SP_DET_UNDECIDED;
		}
		return;
	}
	/* a launch that is the anchor begins its step: it is counted in the new one */
	if (tok == d->how.anchor)
		sp_det_anchor_hit(d, t, out);
	if (launch)
		sp_det_launch(d, t, out);
}

void sp_stepdet_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	memset(out, 0, sizeof *out);
	out->regime = d->how.regime;
	if (t->kind == SP_TOK_TRUTH)
		return;
	if (sp_stepdet_py_token(t)) { /* the Python bridge's: stepdet_py.c */
		sp_stepdet_py_feed(d, t, out);
		return;
	}
	switch (d->kind) {
	case SP_MARK_AUTO:
		auto_feed(d, t, out);
		break;
	case SP_MARK_PROFILER_RANGE:
		if (t->kind == SP_TOK_API)
			range_call(d, t, out);
		break;
	case SP_MARK_KERNEL:
	case SP_MARK_API:
	case SP_MARK_NCCL:
	case SP_MARK_NVTX:
		if (t->kind == (d->kind == SP_MARK_KERNEL ? SP_TOK_KERNEL
				: d->kind == SP_MARK_API  ? SP_TOK_API
				: d->kind == SP_MARK_NCCL ? SP_TOK_NCCL
							  : SP_TOK_NVTX_PUSH) &&
		    ((t->flags & SP_TOKF_MATCHED) || (t->name && sp_stepdet_matches(d, t->name))))
			marker_hit(d, t, out);
		break;
	}
}
