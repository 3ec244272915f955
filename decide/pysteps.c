/* SPDX-License-Identifier: MIT */
/* pysteps.c - optimizer steps to iteration ends (pysteps.h; the optimizer and scaler rules are in
 * docs/STEPS.md, "PyTorch optimizer steps"). */
#include <stdio.h>
#include <string.h>
#include "pysteps.h"

/* The id of optimizer event k (k < p->n and within the history). */
static uint32_t ev(const struct sp_pysteps *p, uint64_t k)
{
	return p->hist[k % SP_PYSTEPS_HIST];
}

/* Position of event k in the cycle's program order. */
static uint32_t pos_of(const struct sp_pysteps *p, uint64_t k)
{
	return (uint32_t)((k - p->from) % p->how.period);
}

/* 1 if every optimizer of the events since p->from that the history still holds is in the last
 * per events (a cycle that leaves one out is no iteration's: 8 critic steps of a WGAN after its
 * generator's). */
static int holds_all(const struct sp_pysteps *p, uint32_t per)
{
	uint64_t lo = p->n - p->learn_from > SP_PYSTEPS_HIST ? p->n - SP_PYSTEPS_HIST : p->learn_from;
	for (uint64_t k = lo; k < p->n - per; k++) {
		uint64_t j = p->n - per;
		while (j < p->n && ev(p, j) != ev(p, k))
			j++;
		if (j == p->n)
			return 0;
	}
	return 1;
}

/* The shortest period the events from p->from to the last one repeat, confirmed (see above), or 0. */
static uint32_t find_period(const struct sp_pysteps *p)
{
	uint64_t len = p->n - p->from, last = p->n - 1;
	for (uint32_t per = 1; per <= SP_PYSTEPS_MAX_CYCLE && 2 * (uint64_t)per <= len; per++) {
		uint64_t need = 2 * per > SP_PYSTEPS_CONFIRM ? 2 * per : SP_PYSTEPS_CONFIRM;
		if (need > len || need > SP_PYSTEPS_HIST)
			continue;
		uint64_t k = 0;
		while (k + per < need && ev(p, last - k) == ev(p, last - k - per))
			k++;
		if (k + per >= need && holds_all(p, per))
			return per;
	}
	return 0;
}

/* The ending position of the cycle in p->cycle (how.period long): the last occurrence of the
 * optimizer stepped least often, the latest one among equals. Sets how.end and how.optimizers. */
static void choose_end(struct sp_pysteps *p)
{
	uint32_t per = p->how.period, best = 0, best_count = UINT32_MAX, distinct = 0;
	for (uint32_t i = 0; i < per; i++) {
		uint32_t c = 0, last = i, first = 1;
		for (uint32_t j = 0; j < per; j++)
			if (p->cycle[j] == p->cycle[i]) {
				c++;
				last = j;
				first &= j >= i;
			}
		distinct += first;
		if (c < best_count || (c == best_count && last > best)) {
			best_count = c;
			best = last;
		}
	}
	p->end_pos = best;
	p->how.end = p->cycle[best];
	p->how.optimizers = distinct;
}

/* The cycle's end at event k (its ending position): SP_PYSTEPS_END, or SP_PYSTEPS_MERGED for the
 * first one after a confirmation when the old rule ended a step less than a period before (inside
 * this iteration); 0 elsewhere in the cycle. */
static unsigned cycle_end(struct sp_pysteps *p, uint64_t k)
{
	if (pos_of(p, k) != p->end_pos)
		return 0;
	int merged = p->fresh && p->last_end && k - (p->last_end - 1) < p->how.period;
	p->fresh = 0;
	return merged ? SP_PYSTEPS_MERGED : SP_PYSTEPS_END;
}

/* The events since p->from confirm a cycle of period per; event k (the last) is in it. Returns
 * the bits for event k: an end if the old rule ended a step here (ended_old), else the new rule's
 * (cycle_end). */
static unsigned confirm(struct sp_pysteps *p, uint32_t per, int ended_old)
{
	uint64_t k = p->n - 1;
	p->how.period = per;
	for (uint64_t j = k + 1 - per; j <= k; j++)
		p->cycle[pos_of(p, j)] = ev(p, j);
	choose_end(p);
	p->how.rule = SP_PYRULE_CYCLE;
	p->how.changes++;
	p->fresh = !ended_old;
	if (ended_old)
		return SP_PYSTEPS_RULE | SP_PYSTEPS_END;
	return SP_PYSTEPS_RULE | cycle_end(p, k);
}

/* The confirmed cycle stopped at event k (the last): the first event after the last end becomes
 * the anchor, and the program order of the next cycle starts right after that anchor's step, so
 * that among equally stepped optimizers the anchor stays the one that ends steps. */
static void break_cycle(struct sp_pysteps *p)
{
	uint64_t k = p->n - 1;
	uint64_t a = p->last_end && p->last_end <= k && k - p->last_end < SP_PYSTEPS_HIST ? p->last_end : k;
	p->how.breaks++;
	p->how.changes++;
	p->how.rule = SP_PYRULE_FIRST;
	p->how.period = p->how.optimizers = 0;
	p->anchor = p->how.end = ev(p, a);
	p->learn_from = a;
	p->from = a + 1;
}

/* The optimizer rule alone on event k (the last). */
static unsigned optim_rule(struct sp_pysteps *p, uint32_t id)
{
	uint64_t k = p->n - 1;
	unsigned r = 0;
	if (p->how.period) {
		if (id == p->cycle[pos_of(p, k)])
			return cycle_end(p, k);
		break_cycle(p);
		r = SP_PYSTEPS_RULE | SP_PYSTEPS_BROKEN;
	}
	if (!p->anchor)
		p->anchor = p->how.end = id;
	int ended = id == p->anchor;
	uint32_t per = find_period(p);
	if (per)
		return r | confirm(p, per, ended);
	return r | (ended ? SP_PYSTEPS_END : 0);
}

void sp_pysteps_init(struct sp_pysteps *p)
{
	memset(p, 0, sizeof *p);
}

unsigned sp_pysteps_optim(struct sp_pysteps *p, uint32_t id)
{
	if (!id)
		return 0;
	p->hist[p->n++ % SP_PYSTEPS_HIST] = id;
	unsigned r = optim_rule(p, id);
	if (r & SP_PYSTEPS_END)
		p->last_end = p->n;
	if (!p->scaler_on) {
		p->opt_ended |= (r & SP_PYSTEPS_END) != 0;
		return r;
	}
	/* the scaler's update ends steps: the optimizer rule's ends only tell whether updates still come */
	p->how.rule = SP_PYRULE_SCALER;
	p->how.end = p->scaler;
	if (!(r & SP_PYSTEPS_END) || ++p->opt_ends < 2)
		return r & ~SP_PYSTEPS_END;
	p->scaler_on = 0; /* two iterations without an update: the program stopped using the scaler */
	p->how.rule = p->how.period ? SP_PYRULE_CYCLE : SP_PYRULE_FIRST;
	p->how.end = p->how.period ? p->cycle[p->end_pos] : p->anchor;
	p->how.changes++;
	p->opt_ended = 1;
	return r | SP_PYSTEPS_RULE;
}

unsigned sp_pysteps_scaler(struct sp_pysteps *p, uint32_t id)
{
	if (!id || (p->scaler_on && id != p->scaler))
		return 0; /* a second scaler: one update per iteration is the first one's */
	int merged = 0;
	unsigned r = SP_PYSTEPS_END;
	if (!p->scaler_on) {
		/* an optimizer step that ended a step in this iteration stands for this update's end */
		merged = p->opt_ended;
		p->scaler_on = 1;
		p->scaler = p->how.end = id;
		p->how.rule = SP_PYRULE_SCALER;
		p->how.changes++;
		r = SP_PYSTEPS_RULE | (merged ? SP_PYSTEPS_MERGED : SP_PYSTEPS_END);
	}
	p->opt_ends = 0;
	p->opt_ended = 0;
	return r;
}

const char *sp_pysteps_say(const struct sp_pysteps_how *h, const char *end, char *buf, size_t n)
{
	char cyc[160] = "";
	if (h->period)
		snprintf(cyc, sizeof cyc, "; a cycle of %u optimizer step%s of %u optimizer%s per iteration", h->period,
			 h->period == 1 ? "" : "s", h->optimizers, h->optimizers == 1 ? "" : "s");
	if (h->rule == SP_PYRULE_SCALER)
		snprintf(buf, n, "each step ends when %s's update() begins (GradScaler: skipped steps too)%s",
			 end ? end : "?", cyc);
	else if (h->rule == SP_PYRULE_CYCLE)
		snprintf(buf, n,
			 "each step ends when %s's step() returns (the cycle's least stepped, last "
			 "optimizer)%s",
			 end ? end : "?", cyc);
	else
		snprintf(buf, n, "each step ends when %s's step() returns (no cycle of optimizers confirmed yet)",
			 end ? end : "?");
	return buf;
}
