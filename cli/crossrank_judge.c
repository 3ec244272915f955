/* SPDX-License-Identifier: MIT */
/* crossrank_judge.c - the verdict of the cross-rank analysis (see crossrank.h): from the per-rank
 * medians and last arrivals that crossrank.c computed, the straggler and its cause (host, compute,
 * communication) or why there is none, the notes that qualify it, and how confident it is. Writes
 * only the verdict fields of the analysis; reads no trace. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "crossrank_impl.h"

/* The most frequent last arriver (a->most, a->share) and the next one's share (a->second). */
static void last_arrivers(struct sp_xrank *a)
{
	for (size_t i = 0; i < a->n; i++) {
		double s = share(&a->r[i]);
		if (a->most < 0 || s > a->share || (s == a->share && a->r[i].last_gpu > a->r[a->most].last_gpu)) {
			a->most = (int)i;
			a->share = s;
		}
	}
	for (size_t i = 0; i < a->n; i++)
		if ((int)i != a->most && share(&a->r[i]) > a->second)
			a->second = share(&a->r[i]);
}

/* A verdict of no straggler, with what was measured, in a->verdict. late, costly: the two tests of
 * a straggler (consistently last; its wait matters); subset: not every rank traced. Returns 1 if it
 * wrote one (the analysis names no straggler), 0 to go on. */
static int no_straggler(struct sp_xrank *a, int late, int costly, int subset)
{
	char l[24], b[2][40];
	const struct rk *m = &a->r[a->most];
	uint64_t xfer = sp_xr_others(a, -1, M_XFER);

	label(a, (size_t)a->most, l, sizeof(l));
	if (subset && (!late || !costly) && xfer >= WAIT_MIN_NS && (double)xfer >= WAIT_FRAC * (double)a->step_med) {
		a->untraced_later = 1;
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler among the %zu traced ranks (of %d): they reach their collectives together, but "
			 "then spend a median %s per step inside NCCL kernels (%.0f%% of a %s step). Either the "
			 "transfers are that slow or, more likely, they all wait for a rank that was not traced. "
			 "Trace every rank (ranks = all) to tell.",
			 a->n, a->world, sp_xr_ms(b[0], (int64_t)xfer), 100.0 * (double)xfer / (double)a->step_med,
			 sp_xr_ms(b[1], (int64_t)a->step_med));
		return 1;
	}
	if (!a->decisive) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler: in each of the %llu paired collectives the ranks arrive within %s of each "
			 "other.",
			 (unsigned long long)a->paired, sp_xr_ms(b[0], a->tie));
		return 1;
	}
	if (late && costly)
		return 0;
	snprintf(a->verdict, sizeof(a->verdict),
		 "No straggler: %s (rank %s arrives last most often, in %.0f%% of its %llu collectives with a clear "
		 "last arrival; the next rank in %.0f%%), and the other ranks wait a median %s per step for it "
		 "(%.1f%% of a %s step).",
		 !late ? "no rank arrives last consistently" : "the waiting is too short to matter", l, 100 * a->share,
		 (unsigned long long)m->decisive, 100 * a->second, sp_xr_ms(b[0], (int64_t)a->wait_others),
		 100 * a->wait_share, sp_xr_ms(b[1], (int64_t)a->step_med));
	if (subset)
		sp_xr_note(a,
			   "Only %zu of %d ranks were traced: a rank that was not traced may still be late; the "
			   "waits here are the traced ranks' waits for each other (lower bounds).",
			   a->n, a->world);
	return 1;
}

/* The cause of straggler m (index most) after the verdict's first sentence, at a->verdict + o. */
static void cause_text(struct sp_xrank *a, const struct rk *m, size_t o, const char *l)
{
	char b[4][40];
	switch (a->cause) {
	case CAUSE_HOST:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: host. Its GPU sits idle a median %s per step waiting for its CPU to launch work (the "
			 "others: %s), while its compute and transfers per step are close to theirs (differences: "
			 "compute %s, transfers %s): look at what rank %s's CPU does before its steps (data loading, "
			 "Python, synchronisation, logging).",
			 sp_xr_ms(b[0], (int64_t)m->med[M_STALL]), sp_xr_ms(b[1], (int64_t)a->peer[0]),
			 sp_xr_ms(b[2], a->excess[1]), sp_xr_ms(b[3], a->excess[2]), l);
		break;
	case CAUSE_COMPUTE:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: compute. Its GPU runs a median %s of non-NCCL kernels per step against the others' %s "
			 "(%s more): it has more work (a larger batch or shard, uneven layers) or a slower GPU.",
			 sp_xr_ms(b[0], (int64_t)m->med[M_COMPUTE]), sp_xr_ms(b[1], (int64_t)a->peer[1]),
			 sp_xr_ms(b[2], a->excess[1]));
		break;
	default:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: communication. Its own transfers take a median %s per step against the others' %s "
			 "(%s more): check its links (NVLink, PCIe, network) and NCCL settings.",
			 sp_xr_ms(b[0], (int64_t)m->med[M_XFER]), sp_xr_ms(b[1], (int64_t)a->peer[2]),
			 sp_xr_ms(b[2], a->excess[2]));
	}
}

/* The notes that qualify a named straggler m (label l): near the bars, a cause that explains
 * little, the others' CPUs blocked waiting for it, a subset of ranks traced. */
static void straggler_notes(struct sp_xrank *a, const struct rk *m, const char *l, uint64_t peer_nccl, int subset)
{
	char b[2][40];
	uint64_t cpu = sp_xr_others(a, a->most, M_CPUWAIT);

	a->marginal = (double)a->wait_others < CLEAR_MARGIN * WAIT_MIN_NS || a->wait_share < CLEAR_MARGIN * WAIT_FRAC;
	if (a->marginal)
		sp_xr_note(a,
			   "Marginal: the other ranks' wait for rank %s (%.1f%% of a step, %s) is close to what this "
			   "verdict needs (%.0f%% of a step and %s); ranks of one program differ this much when their "
			   "hosts' CPUs run at different speeds. Record more steps before acting on it.",
			   l, 100 * a->wait_share, sp_xr_ms(b[0], (int64_t)a->wait_others), 100 * WAIT_FRAC,
			   sp_xr_ms(b[1], WAIT_MIN_NS));
	if (!a->explained)
		sp_xr_note(a,
			   "Unsure of the cause: rank %s's largest excess over the others (%s: %s per step) explains "
			   "less than a quarter of the wait it causes; its lateness may come from what this trace does "
			   "not record (CPU work inside kernels' launch path, another process on its GPU).",
			   l, cause_names[a->cause], sp_xr_ms(b[0], a->excess[a->cause]));
	if (cpu >= WAIT_MIN_NS)
		sp_xr_note(a,
			   "Waiting on the CPU: the other ranks' CPUs sit blocked in synchronising calls (.item(), "
			   "a stream, event or device synchronisation) a median %s per step while their collectives "
			   "wait for rank %s: that is waiting for a peer, not host work.",
			   sp_xr_ms(b[0], (int64_t)cpu), l);
	if (subset)
		sp_xr_note(a,
			   "Only %zu of %d ranks were traced. Rank %s's own NCCL kernels are short (median %s per step "
			   "against the others' %s): it waits for no one traced and likely for no one at all, so it is "
			   "probably the last of all ranks; a rank that was not traced could still be as late.",
			   a->n, a->world, l, sp_xr_ms(b[0], (int64_t)m->med[M_NCCL]),
			   sp_xr_ms(b[1], (int64_t)peer_nccl));
}

/* Names the straggler and its cause, or says why there is none, in a->verdict. */
static void judge(struct sp_xrank *a)
{
	char l[24], b[3][40];
	int subset = a->world > 0 && (size_t)a->world > a->n;

	last_arrivers(a);
	if (a->n < 2) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "One trace: a straggler needs two or more ranks' traces of one run.");
		return;
	}
	if (!a->paired) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler can be named: no collective (same communicator and sequence number, NCCL "
			 "kernel recorded with its times) is in two or more traces.");
		return;
	}
	struct rk *m = &a->r[a->most];
	a->wait_others = sp_xr_others(a, a->most, M_WAIT);
	a->wait_share = a->step_med ? (double)a->wait_others / (double)a->step_med : 0.0;
	label(a, (size_t)a->most, l, sizeof(l));
	int late = m->decisive && a->share >= LATE_SHARE && a->share >= LATE_RATIO * a->second;
	int costly = a->wait_others >= WAIT_MIN_NS && (double)a->wait_others >= WAIT_FRAC * (double)a->step_med;
	if (no_straggler(a, late, costly, subset))
		return;
	static const int q[3] = { M_STALL, M_COMPUTE, M_XFER };
	for (int i = 0; i < 3; i++) {
		a->peer[i] = sp_xr_others(a, a->most, q[i]);
		a->excess[i] = sub((int64_t)m->med[q[i]], (int64_t)a->peer[i]);
		if (!i || a->excess[i] > a->excess[a->cause])
			a->cause = i;
	}
	a->explained = a->excess[a->cause] > 0 && (uint64_t)a->excess[a->cause] * 4 >= a->wait_others;
	uint64_t peer_nccl = sp_xr_others(a, a->most, M_NCCL);
	if (subset && m->med[M_NCCL] * 2 >= peer_nccl) {
		/* its own NCCL kernels run as long as the others': it waits too, for someone not traced */
		a->untraced_later = 1;
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler among the %zu traced ranks (of %d): rank %s arrives last of them in %.0f%% of "
			 "the collectives, but its own NCCL kernels run about as long (median %s per step) as the "
			 "others' (%s): it waits too, most likely for a rank that was not traced. Trace every rank "
			 "(ranks = all) to name it.",
			 a->n, a->world, l, 100 * a->share, sp_xr_ms(b[0], (int64_t)m->med[M_NCCL]),
			 sp_xr_ms(b[1], (int64_t)peer_nccl));
		return;
	}
	a->straggler = a->most;
	int n = snprintf(a->verdict, sizeof(a->verdict),
			 "Straggler: rank %s. It arrives last in %.0f%% of its %llu collectives with a clear last "
			 "arrival (the next rank in %.0f%%), and the other ranks wait for it a median %s per step "
			 "(%.0f%% of a %s step). ",
			 l, 100 * a->share, (unsigned long long)m->decisive, 100 * a->second,
			 sp_xr_ms(b[0], (int64_t)a->wait_others), 100 * a->wait_share,
			 sp_xr_ms(b[1], (int64_t)a->step_med));
	cause_text(a, m, n > 0 && (size_t)n < sizeof(a->verdict) ? (size_t)n : sizeof(a->verdict) - 1, l);
	straggler_notes(a, m, l, peer_nccl, subset);
}

/* Records a doubt about the verdict: a LOW one sets the confidence low, a MEDIUM one lowers it a
 * level. Can't fail (reasons past the fourth are counted, not kept). */
static void doubt(struct sp_xrank *a, int how, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void doubt(struct sp_xrank *a, int how, const char *fmt, ...)
{
	va_list ap;
	a->conf = how == CONF_LOW ? CONF_LOW : a->conf > CONF_LOW ? a->conf - 1 : CONF_LOW;
	if (a->nconf == (int)(sizeof(a->conf_why) / sizeof(a->conf_why[0])))
		return;
	va_start(ap, fmt);
	vsnprintf(a->conf_why[a->nconf++], sizeof(a->conf_why[0]), fmt, ap);
	va_end(ap);
}

/* How sure the verdict is (a->conf and the reasons that lowered it): the steps and collectives
 * behind it, how clearly the straggler is last and how far its wait is from the bars, whether its
 * cause explains the wait, how many arrivals were inferred, and what was not traced or aligned. */
static void confidence(struct sp_xrank *a)
{
	size_t steps = SIZE_MAX, unchecked = 0;
	a->conf = CONF_HIGH;
	if (a->n < 2 || !a->paired)
		return; /* nothing was judged */
	for (size_t i = 0; i < a->n; i++) {
		steps = a->r[i].st.n < steps ? a->r[i].st.n : steps;
		unchecked += a->r[i].clock == CLK_NONE;
	}
	if (steps < SURE_STEPS)
		doubt(a, steps < FEW_STEPS ? CONF_LOW : CONF_MEDIUM, "only %zu steps in the shortest trace", steps);
	if (a->decisive && a->decisive < MIN_COLLS)
		doubt(a, CONF_LOW, "only %llu collectives with a clear last arrival", (unsigned long long)a->decisive);
	if (a->straggler >= 0) {
		if (a->marginal)
			doubt(a, CONF_LOW, "the wait for it is near the bars");
		if (!a->explained)
			doubt(a, CONF_MEDIUM, "its cause explains less than a quarter of the wait");
		if (a->share < SURE_SHARE)
			doubt(a, CONF_MEDIUM, "it is last in only %.0f%% of its collectives", 100 * a->share);
	} else if (a->decisive && !a->untraced_later && a->wait_share >= WAIT_FRAC / CLEAR_MARGIN) {
		doubt(a, CONF_MEDIUM, "the ranks wait for each other %.1f%% of a step, near the %.0f%% bar",
		      100 * a->wait_share, 100 * WAIT_FRAC);
	}
	if (a->decisive && 2 * a->inferred > a->decisive)
		doubt(a, CONF_MEDIUM, "%llu of %llu arrivals inferred from CPU waits (NCCL kernels without times)",
		      (unsigned long long)a->inferred, (unsigned long long)a->decisive);
	if (unchecked && a->n > 1)
		doubt(a, CONF_MEDIUM, "%zu traces' clocks could not be checked against their collectives", unchecked);
	if (a->world > 0 && (size_t)a->world > a->n)
		doubt(a, CONF_MEDIUM, "%zu of %d ranks traced", a->n, a->world);
}

void sp_xr_judge(struct sp_xrank *a)
{
	judge(a);
	confidence(a);
	if (a->n < 2 || !a->paired)
		return;
	size_t o = strlen(a->verdict);
	int w = snprintf(a->verdict + o, sizeof(a->verdict) - o, " Confidence: %s", conf_names[a->conf]);
	for (int i = 0; i < a->nconf && w > 0 && (o += (size_t)w) < sizeof(a->verdict); i++)
		w = snprintf(a->verdict + o, sizeof(a->verdict) - o, "%s%s", i ? "; " : " (", a->conf_why[i]);
	o = strlen(a->verdict);
	snprintf(a->verdict + o, sizeof(a->verdict) - o, "%s.", a->nconf ? ")" : "");
}
