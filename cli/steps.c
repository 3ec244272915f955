/* SPDX-License-Identifier: MIT */
/* steps.c - see steps.h. GPU operations are attributed to steps through the CPU call with the
 * same correlation id (a binary search in the window's calls sorted by id), falling back to the
 * operation's own start; busy and idle come from the window's GPU intervals merged once. */
#include <stdlib.h>
#include <string.h>
#include "format.h"
#include "commstats.h"
#include "steps.h"
#include "decide/kclass.h"

static int cmp_q(const void *a, const void *b)
{
	return sp_cmp_u64(((const struct sp_steps_q *)a)->t, ((const struct sp_steps_q *)b)->t);
}

static int cmp_u64p(const void *a, const void *b)
{
	return sp_cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

static int cmp_i64p(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

struct sp_step_stat *sp_steps_at(struct sp_step_stat *st, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) { /* first step starting after t */
		size_t mid = (lo + hi) / 2;
		if (st[mid].start <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && t < st[lo - 1].end ? &st[lo - 1] : NULL;
}

/* The cached class bits of kernel name id (sp_steps.nccl). */
static uint8_t kernel_bits(struct sp_steps *s, struct sp_trace_reader *r, uint32_t id)
{
	s->nccl = sp_xgrow(s->nccl, &s->ncap, 1, id);
	if (!s->nccl[id]) {
		const char *name = sp_trace_string(r, id);
		s->nccl[id] =
			(uint8_t)(1 | (name && sp_nccl_is_kernel(name) ? 2 : 0) | (sp_kernel_trains(name) ? 4 : 0));
	}
	return s->nccl[id];
}

int sp_steps_is_nccl(struct sp_steps *s, struct sp_trace_reader *r, uint32_t id)
{
	return (kernel_bits(s, r, id) & 2) != 0;
}

int sp_steps_trains(struct sp_steps *s, struct sp_trace_reader *r, uint32_t id)
{
	return (kernel_bits(s, r, id) & 4) != 0;
}

static int cmp_iv(const void *a, const void *b)
{
	return sp_cmp_u64(((const struct sp_steps_iv *)a)->s, ((const struct sp_steps_iv *)b)->s);
}

size_t sp_steps_merge(struct sp_steps_iv *iv, size_t n)
{
	size_t m = 0;
	sp_sort(iv, n, sizeof(*iv), cmp_iv);
	for (size_t i = 0; i < n; i++) { /* merge into disjoint intervals, in place */
		if (m && iv[i].s <= iv[m - 1].e) {
			if (iv[i].e > iv[m - 1].e)
				iv[m - 1].e = iv[i].e;
		} else {
			iv[m++] = iv[i];
		}
	}
	return m;
}

uint64_t sp_steps_covered(const struct sp_steps_iv *iv, size_t m, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = m;
	uint64_t sum = 0;
	while (a < b) { /* first interval ending after lo */
		size_t mid = (a + b) / 2;
		if (iv[mid].e <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < m && iv[a].s < hi; a++)
		sum += (iv[a].e < hi ? iv[a].e : hi) - (iv[a].s > lo ? iv[a].s : lo);
	return sum;
}

uint64_t sp_median_u64(uint64_t *v, size_t n)
{
	if (!n)
		return 0;
	sp_sort(v, n, sizeof(*v), cmp_u64p);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void sp_steps_begin(struct sp_steps *s, const struct sp_window *w)
{
	s->first = s->n;
	s->t0 = w->t0;
	s->t1 = w->t1;
	s->sweeping = 0;
	s->busy = s->cum = 0;
	s->cur = (struct sp_steps_iv){ 0, 0 };
	s->next = s->nactive = s->nq = s->qat = 0;
	s->reach = 0;
	for (size_t i = 0; i < w->nsteps; i++) {
		const struct sp_event *e = &w->steps[i];
		s->st = sp_xgrow(s->st, &s->cap, sizeof(*s->st), s->n);
		s->st[s->n++] = (struct sp_step_stat){ .number = e->u.step.number,
						       .window = w->id,
						       .start = e->start,
						       .end = e->end,
						       .how = e->u.step,
						       .marker = e->name };
	}
}

void sp_steps_event(struct sp_steps *s, struct sp_trace_reader *r, const struct sp_event *e, uint64_t anchor)
{
	size_t nst = s->n - s->first;
	if (!sp_ev_is_gpu(e) || !nst)
		return;
	uint64_t d = e->end > e->start ? e->end - e->start : 0;
	struct sp_step_stat *in = sp_steps_at(s->st + s->first, nst, anchor);
	if (!in)
		return;
	if (e->end > in->gpu_end)
		in->gpu_end = e->end;
	if (e->kind == SP_EV_KERNEL) {
		int trains = sp_steps_trains(s, r, e->name);
		in->kernels++;
		in->kernel_ns += d;
		in->nccl_ns += sp_steps_is_nccl(s, r, e->name) ? d : 0;
		in->train_kernels += trains;
		in->cur_run = trains ? 0 : in->cur_run + 1;
		if (in->cur_run > in->plain_run)
			in->plain_run = in->cur_run;
	} else {
		in->copy_ns += d;
	}
}

/* Before the sweep: per step, where its span's covered part ends (its start), and the times whose
 * covered ns its host stall needs (the previous step's GPU end, else its start; its GPU end),
 * sorted. Exits if memory runs out. */
static void sweep_begin(struct sp_steps *s)
{
	size_t nst = s->n - s->first;
	const struct sp_step_stat *st = s->st ? s->st + s->first : NULL; /* NULL while s has no step */

	s->sweeping = 1;
	s->upto = sp_xgrow(s->upto, &s->upto_cap, sizeof(*s->upto), nst);
	s->cov = sp_xgrow(s->cov, &s->cov_cap, sizeof(*s->cov), 2 * nst);
	for (size_t k = 0; k < nst; k++) {
		uint64_t lo = k && st[k - 1].gpu_end ? st[k - 1].gpu_end : st[k].start;
		s->upto[k] = st[k].start;
		if (st[k].gpu_end <= lo)
			continue;
		s->q = sp_xgrow(s->q, &s->q_cap, sizeof(*s->q), s->nq + 1);
		s->q[s->nq++] = (struct sp_steps_q){ lo, 2 * k };
		s->q[s->nq++] = (struct sp_steps_q){ st[k].gpu_end, 2 * k + 1 };
	}
	sp_sort(s->q, s->nq, sizeof(*s->q), cmp_q);
}

/* One merged GPU interval [a, b) of the window, in time order: the covered ns before the queried
 * times, and the busy and idle time of each step whose span it meets (steps are met in their order:
 * a step is reached once the latest start up to it lies before b, and left once b passes its end,
 * as a walk of the merged intervals step after step would). Exits if memory runs out. */
static void sweep_interval(struct sp_steps *s, uint64_t a, uint64_t b)
{
	size_t nst = s->n - s->first, kept = 0;
	struct sp_step_stat *st = s->st ? s->st + s->first : NULL; /* NULL while s has no step */

	s->busy += b - a;
	for (; s->qat < s->nq && s->q[s->qat].t <= a; s->qat++)
		s->cov[s->q[s->qat].slot] = s->cum;
	for (; s->qat < s->nq && s->q[s->qat].t < b; s->qat++)
		s->cov[s->q[s->qat].slot] = s->cum + (s->q[s->qat].t - a);
	s->cum += b - a;
	for (; s->next < nst && (st[s->next].start > s->reach ? st[s->next].start : s->reach) < b; s->next++) {
		s->reach = st[s->next].start > s->reach ? st[s->next].start : s->reach;
		s->active = sp_xgrow(s->active, &s->active_cap, sizeof(*s->active), s->nactive);
		s->active[s->nactive++] = s->next;
	}
	for (size_t i = 0; i < s->nactive; i++) {
		size_t k = s->active[i];
		struct sp_step_stat *x = &st[k];
		if (x->end <= a)
			continue; /* the sweep is past it */
		uint64_t from = a > x->start ? a : x->start, to = b < x->end ? b : x->end;
		if (from > s->upto[k] && from - s->upto[k] > x->idle)
			x->idle = from - s->upto[k];
		x->busy += to - from;
		s->upto[k] = to;
		s->active[kept++] = k;
	}
	s->nactive = kept;
}

void sp_steps_sweep(struct sp_steps *s, const struct sp_event *e)
{
	uint64_t a = e->start < s->t0 ? s->t0 : e->start, b = e->end > s->t1 ? s->t1 : e->end;

	if (!s->sweeping)
		sweep_begin(s);
	if (b <= a)
		return;
	if (s->cur.e > s->cur.s && a <= s->cur.e) { /* overlaps or touches the open one */
		if (b > s->cur.e)
			s->cur.e = b;
		return;
	}
	if (s->cur.e > s->cur.s)
		sweep_interval(s, s->cur.s, s->cur.e);
	s->cur = (struct sp_steps_iv){ a, b };
}

uint64_t sp_steps_end(struct sp_steps *s)
{
	size_t nst = s->n - s->first;
	struct sp_step_stat *st = s->st ? s->st + s->first : NULL; /* NULL while s has no step */

	if (!s->sweeping)
		sweep_begin(s);
	if (s->cur.e > s->cur.s)
		sweep_interval(s, s->cur.s, s->cur.e);
	for (; s->qat < s->nq; s->qat++)
		s->cov[s->q[s->qat].slot] = s->cum;
	for (size_t k = 0; k < nst; k++) {
		struct sp_step_stat *x = &st[k];
		if (x->end > s->upto[k] && x->end - s->upto[k] > x->idle)
			x->idle = x->end - s->upto[k];
		uint64_t lo = k && st[k - 1].gpu_end ? st[k - 1].gpu_end : x->start;
		if (x->gpu_end > lo) /* no GPU work ran while the GPU waited for this rank's CPU */
			x->stall = x->gpu_end - lo - (s->cov[2 * k + 1] - s->cov[2 * k]);
	}
	s->nactive = s->nq = s->qat = 0;
	return s->busy;
}

struct add_window {
	struct sp_steps *s;
	struct sp_trace_reader *r;
	struct sp_windows *g;
};

static void add_event(void *ctx, const struct sp_event *e)
{
	struct add_window *x = ctx;
	sp_steps_event(x->s, x->r, e, sp_windows_anchor(x->g, e));
}

static void add_sweep(void *ctx, const struct sp_event *e)
{
	sp_steps_sweep(((struct add_window *)ctx)->s, e);
}

uint64_t sp_steps_add_window(struct sp_steps *s, struct sp_trace_reader *r, struct sp_windows *g,
			     const struct sp_window *w)
{
	struct add_window x = { s, r, g };
	sp_steps_begin(s, w);
	sp_windows_each(g, add_event, &x);
	sp_windows_sorted(g, sp_ev_is_gpu, add_sweep, &x);
	return sp_steps_end(s);
}

void sp_steps_free_scratch(struct sp_steps *s)
{
	free(s->active);
	free(s->upto);
	free(s->q);
	free(s->cov);
	s->active = s->upto = s->cov = NULL;
	s->q = NULL;
	s->active_cap = s->upto_cap = s->q_cap = s->cov_cap = 0;
}

void sp_steps_print(const struct sp_steps *s, FILE *out)
{
	char t[5][32];

	if (!s->n)
		return;
	fprintf(out, "\nPer step: GPU work counted in the step whose CPU call launched it; busy and idle inside "
		     "the step's span\n");
	fprintf(out, "%-8s %6s %12s %8s %12s %12s %14s %9s %17s\n", "Step", "Window", "Duration", "Kernels",
		"Kernel time", "NCCL time", "Copy/set time", "GPU busy", "Longest GPU idle");
	for (size_t i = 0; i < s->n && i < SP_STEPS_ROWS; i++) {
		const struct sp_step_stat *x = &s->st[i];
		uint64_t dur = sp_step_ns(x);
		fprintf(out, "%-8lld %6u %12s %8llu %12s %12s %14s %8.1f%% %17s\n", (long long)x->number, x->window,
			sp_fmt_ns(t[0], 32, dur), (unsigned long long)x->kernels, sp_fmt_ns(t[1], 32, x->kernel_ns),
			sp_fmt_ns(t[2], 32, x->nccl_ns), sp_fmt_ns(t[3], 32, x->copy_ns),
			dur ? 100.0 * x->busy / dur : 0.0, sp_fmt_ns(t[4], 32, x->idle));
	}
	if (s->n > SP_STEPS_ROWS)
		fprintf(out, "... %zu more steps (--window ID shows one window)\n", s->n - SP_STEPS_ROWS);
	for (size_t i = 0; i < s->n; i++)
		if (s->st[i].how.flags & SP_STEP_AT_EXIT)
			fprintf(out,
				"Step %lld ended when the process exited, not at a step boundary: it holds whatever "
				"the "
				"program did after its last iteration (a final evaluation, a save).\n",
				(long long)s->st[i].number);
}

/* The step numbered num in s, or NULL. */
static const struct sp_step_stat *find_step(const struct sp_steps *s, int64_t num)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->st[i].number == num)
			return &s->st[i];
	return NULL;
}

uint64_t sp_steps_median_ns(const struct sp_steps *s)
{
	uint64_t *d = sp_xrealloc(NULL, (s->n + 1) * sizeof(*d)), m;
	for (size_t i = 0; i < s->n; i++)
		d[i] = sp_step_ns(&s->st[i]);
	m = sp_median_u64(d, s->n);
	free(d);
	return m;
}

const char *sp_rank_label(char *buf, size_t len, const int *rank, size_t n, size_t i)
{
	int dup = rank[i] < 0;
	for (size_t k = 0; k < n && !dup; k++)
		dup = k != i && rank[k] == rank[i];
	if (dup)
		snprintf(buf, len, "#%zu", i);
	else
		snprintf(buf, len, "%d", rank[i]);
	return buf;
}

void sp_steps_compare(const struct sp_steps *s, const int *rank, size_t n, FILE *out)
{
	int64_t *nums = NULL;
	size_t nn = 0, rows = 0, common = 0;
	uint64_t *v = sp_xrealloc(NULL, (n + 1) * sizeof(*v));
	char t[6][32], rk[24];

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < s[i].n; k++) {
			nums = sp_xrealloc(nums, (nn + 1) * sizeof(*nums));
			nums[nn++] = s[i].st[k].number;
		}
	sp_sort(nums, nn, sizeof(*nums), cmp_i64p);
	fprintf(out, "Step times across %zu traces (a step's time is marker to marker on its own rank)\n", n);
	fprintf(out, "%-8s %5s %12s %12s %12s %8s %8s\n", "Step", "Ranks", "Fastest", "Median", "Slowest", "By rank",
		"Spread");
	for (size_t j = 0; j < nn; j++) {
		size_t have = 0, slow = 0;
		uint64_t lo = 0, hi = 0;
		if (j && nums[j] == nums[j - 1])
			continue;
		for (size_t i = 0; i < n; i++) {
			const struct sp_step_stat *x = find_step(&s[i], nums[j]);
			if (!x)
				continue;
			uint64_t d = sp_step_ns(x);
			if (!have || d > hi)
				hi = d, slow = i;
			if (!have || d < lo)
				lo = d;
			v[have++] = d;
		}
		common += have == n;
		if (rows++ < SP_STEPS_ROWS) {
			sp_rank_label(rk, sizeof(rk), rank, n, slow);
			double pct = lo ? 100.0 * (double)(hi - lo) / lo : 0.0;
			char sp[16]; /* the column stays 8 wide: 12.3%, 1234%, >99999% */
			if (pct < 1000)
				snprintf(sp, sizeof(sp), "%.1f%%", pct);
			else if (pct < 99999.5)
				snprintf(sp, sizeof(sp), "%.0f%%", pct);
			else
				snprintf(sp, sizeof(sp), ">99999%%");
			fprintf(out, "%-8lld %5zu %12s %12s %12s %8s %8s\n", (long long)nums[j], have,
				sp_fmt_ns(t[0], 32, lo), sp_fmt_ns(t[1], 32, sp_median_u64(v, have)),
				sp_fmt_ns(t[2], 32, hi), have > 1 && hi > lo ? rk : "-", sp);
		}
	}
	if (rows > SP_STEPS_ROWS)
		fprintf(out, "... %zu more step%s\n", rows - SP_STEPS_ROWS, sp_plural(rows - SP_STEPS_ROWS));

	if (!common)
		fprintf(out, "\nNo step number is in every trace: are these ranks of one run, with one schedule?\n");
	free(nums);
	free(v);
}

void sp_steps_free(struct sp_steps *s)
{
	free(s->st);
	sp_steps_free_scratch(s);
	free(s->nccl);
	memset(s, 0, sizeof(*s));
}
