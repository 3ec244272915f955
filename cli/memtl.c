/* SPDX-License-Identifier: MIT */
/* memtl.c - see memtl.h. Memory and step records are settled from one WINDOW_BEGIN to the next,
 * as windows.c does for the other kinds: a record joins the window if it starts in [t0, t1].
 * SNAPSHOT records lie before t0 and may be written before their window's BEGIN, or
 * (back-to-back windows) before the previous window's END; one read while window W is open still
 * belongs to the next window if W already has a snapshot of that allocation or if it was made
 * after W opened. PEAK records go to the window they are read in or just after.
 * Streaming: SNAPSHOT, PEAK and STEP records are held (the live set when the window opened, and a
 * few); allocations and frees are read again from the file, in time order (a heap as deep as the
 * file is out of order among them), once for the levels, peaks and thinned points, once for the
 * live set (what is alive at each peak, the largest allocations). Memory: the live set, the
 * thinned points, SP_MEMTL_MAX_ALLOCS allocations; never the window's records. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "format.h"
#include "evheap.h"
#include "memtl_impl.h"

struct key sp_memtl_key_of(const struct sp_event *e)
{
	return (struct key){ e->u.mem.addr, e->device | (e->sub == SP_MEM_VMM ? 0x10000u : 0) };
}

static int is_snapshot(const struct sp_event *e)
{
	return e->kind == SP_EV_ALLOC && (e->u.mem.flags & SP_MEMF_SNAPSHOT);
}

static int is_peak(const struct sp_event *e)
{
	return e->kind == SP_EV_ALLOC && (e->u.mem.flags & SP_MEMF_PEAK);
}

/* An allocation or free made at its time (not a snapshot or a peak). */
static int is_plain(const struct sp_event *e)
{
	return (e->kind == SP_EV_ALLOC || e->kind == SP_EV_FREE) && !is_snapshot(e) && !is_peak(e);
}

static void push_ev(struct sp_event **a, size_t *n, size_t *cap, const struct sp_event *e)
{
	*a = sp_xgrow(*a, cap, sizeof(**a), *n);
	(*a)[(*n)++] = *e;
}

/* ---- the live map ---- */

static size_t lmap_pos(const struct lmap *m, struct key k)
{
	uint64_t x = k.addr ^ ((uint64_t)k.dev << 47); /* mixed: aligned addresses differ in high bits only */
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	size_t i = (size_t)x & (m->cap - 1);
	while (m->slot[i].used && (m->slot[i].k.addr != k.addr || m->slot[i].k.dev != k.dev))
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* The entry of k, or NULL. */
struct live *sp_memtl_lmap_get(const struct lmap *m, struct key k)
{
	if (!m->n)
		return NULL;
	size_t i = lmap_pos(m, k);
	return m->slot[i].used ? &m->slot[i] : NULL;
}

/* The entry of k, added (zeroed but its key) if absent. Exits if memory runs out. */
struct live *sp_memtl_lmap_put(struct lmap *m, struct key k)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct lmap big = { .cap = m->cap ? m->cap * 2 : 256 };
		big.slot = calloc(big.cap, sizeof(*big.slot));
		if (!big.slot)
			sp_oom();
		for (size_t i = 0; i < m->cap; i++)
			if (m->slot[i].used)
				big.slot[lmap_pos(&big, m->slot[i].k)] = m->slot[i];
		big.n = m->n;
		free(m->slot);
		*m = big;
	}
	size_t i = lmap_pos(m, k);
	if (!m->slot[i].used) {
		m->slot[i] = (struct live){ .k = k, .used = 1 };
		m->n++;
	}
	return &m->slot[i];
}

/* Removes entry x (of m), moving back the entries its probe sequence holds. Can't fail. */
void sp_memtl_lmap_del(struct lmap *m, struct live *x)
{
	size_t i = (size_t)(x - m->slot), j = i;
	m->slot[i].used = 0;
	m->n--;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->slot[j].used)
			return;
		size_t h = lmap_pos(m, m->slot[j].k); /* stops at the hole if it lies on j's way */
		if (h == j)
			continue;
		m->slot[h] = m->slot[j];
		m->slot[j].used = 0;
	}
}

void sp_memtl_lmap_clear(struct lmap *m)
{
	if (m->n)
		memset(m->slot, 0, m->cap * sizeof(*m->slot));
	m->n = 0;
}

/* ---- the stretch: held records, allocations and frees read again ---- */

/* Counts allocation or free e (the stretch's next) in the disorder bound: how many before it
 * start after it, at most (checkpoints of the running maximum). Exits if memory runs out. */
static void count_plain(struct sp_memtl_reader *m, const struct sp_event *e)
{
	uint64_t i = m->nplain++;
	if (!i || e->start >= m->runmax) {
		m->runmax = e->start;
	} else {
		size_t lo = 0, hi = m->ncp; /* the first checkpoint past e: all before its stretch start before e */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (e->start < m->cp[mid])
				hi = mid;
			else
				lo = mid + 1;
		}
		uint64_t after = i - (uint64_t)lo * CP_EVERY;
		m->reorder = after > m->reorder ? after : m->reorder;
	}
	if ((i + 1) % CP_EVERY == 0) {
		m->cp = sp_xgrow(m->cp, &m->cp_cap, sizeof(*m->cp), m->ncp);
		m->cp[m->ncp++] = m->runmax;
	}
}

/* Hands the stretch's allocations and frees (those carried, then the file's) to fn, in file
 * order. The reader goes on where it was. */
static void replay(struct sp_memtl_reader *m, plain_fn fn, void *ctx)
{
	struct sp_trace_pos back;
	struct sp_event ev;

	for (size_t i = 0; i < m->ncarried; i++)
		fn(m, ctx, &m->carried[i]);
	if (!m->nrec)
		return;
	sp_trace_tell(m->r, &back);
	if (sp_trace_seek(m->r, &m->pos) == 0)
		for (uint64_t k = 0; k < m->nrec && sp_trace_next(m->r, &ev) == 1; k++)
			if (is_plain(&ev))
				fn(m, ctx, &ev);
	sp_trace_seek(m->r, &back);
}

/* A heap entry of the pass by start: the record and its place in file order. */

struct sorted {
	plain_fn fn;            /* given the window's allocations and frees by start */
	void *ctx;
	uint64_t t0, t1;        /* the window's span, as settled */
	struct sp_hent *h;
	size_t n, cap;
	uint64_t seq;
	const struct sp_memtl *next; /* the next window (NULL: none, or not asked): what is not the
	                               window's and starts after the next's start is kept for it */
	struct sp_event *keep;
	size_t nkeep, keep_cap;
};

static int hless(const struct sp_hent *a, const struct sp_hent *b)
{
	return a->e.start != b->e.start ? a->e.start < b->e.start : a->seq < b->seq;
}

static void heap_pop(struct sp_memtl_reader *m, struct sorted *s)
{
	struct sp_hent top = sp_evheap_pop(s->h, &s->n, hless);
	s->fn(m, s->ctx, &top.e);
}

static void sorted_one(struct sp_memtl_reader *m, void *ctx, const struct sp_event *e)
{
	struct sorted *s = ctx;
	uint64_t seq = s->seq++;
	if (!m->have_cur || e->start < s->t0 || e->start > s->t1) {
		if (s->next && e->start >= s->next->t0)
			push_ev(&s->keep, &s->nkeep, &s->keep_cap, e);
		return;
	}
	s->h = sp_xgrow(s->h, &s->cap, sizeof(*s->h), s->n);
	size_t i = s->n++;
	s->h[i] = (struct sp_hent){ *e, seq };
	sp_evheap_up(s->h, i, hless);
	if (s->n > m->reorder + 1) /* no record still to come starts before the first one now */
		heap_pop(m, s);
}

/* A pass over the open window's allocations and frees (start in [t0, t1], the span settled) by
 * start, then file order: fn(m, ctx, e) for each. With next, the records kept for the next window
 * (not this one's, starting at or after next's start) go to next_carried. Exits if memory runs
 * out. */
void sp_memtl_pass(struct sp_memtl_reader *m, uint64_t t0, uint64_t t1, const struct sp_memtl *next, plain_fn fn,
		 void *ctx)
{
	struct sorted s = { .fn = fn, .ctx = ctx, .t0 = t0, .t1 = t1, .next = next };
	if (m->nplain)
		replay(m, sorted_one, &s);
	while (s.n)
		heap_pop(m, &s);
	free(s.h);
	if (next) {
		free(m->next_carried);
		m->next_carried = s.keep, m->nnext_carried = s.nkeep;
	} else {
		free(s.keep);
	}
}

/* Starts the next stretch of the file (from where the reader is), with the records carried. */
static void stretch_begin(struct sp_memtl_reader *m)
{
	sp_trace_tell(m->r, &m->pos);
	m->nrec = m->nplain = m->ncp = m->reorder = 0;
	for (size_t i = 0; i < m->ncarried; i++)
		count_plain(m, &m->carried[i]);
}

/* ---- settling a stretch ---- */

/* Splits the held records between the open window (into snap/peak/steps) and next (kept in held;
 * next is NULL at the end of the file); the rest are outside any window. Then next is open. The
 * allocations and frees are decided by their passes (build, or a pass that only keeps next's). */
static void settle(struct sp_memtl_reader *m, const struct sp_memtl *next)
{
	struct sp_memtl *w = &m->cur;
	size_t kept = 0;

	m->nsnap = m->npeak = m->nsteps = 0;
	sp_memtl_lmap_clear(&m->keys);
	if (m->have_cur && !w->complete)
		w->t1 = next ? next->t0 - (next->t0 > w->t0) : UINT64_MAX;
	for (size_t i = 0; i < m->nheld; i++) {
		const struct sp_event *e = &m->held[i];
		int mine;
		if (is_peak(e)) {
			mine = m->have_cur;
		} else if (is_snapshot(e)) {
			mine = m->have_cur && i < m->end_at && e->start <= w->t0 && !sp_memtl_lmap_get(&m->keys, sp_memtl_key_of(e));
			if (mine)
				sp_memtl_lmap_put(&m->keys, sp_memtl_key_of(e));
		} else {
			mine = m->have_cur && e->start >= w->t0 && e->start <= w->t1;
		}
		if (mine && is_peak(e))
			push_ev(&m->peak, &m->npeak, &m->peakcap, e);
		else if (mine && is_snapshot(e))
			push_ev(&m->snap, &m->nsnap, &m->snapcap, e);
		else if (mine)
			push_ev(&m->steps, &m->nsteps, &m->stepscap, e);
		else if (next && (is_snapshot(e) || (!is_peak(e) && e->start >= next->t0)))
			m->held[kept++] = *e;
	}
	m->nheld = kept;
	m->end_at = SIZE_MAX;
}

/* A window without its END ends at the last end of its records (what a window with [t0, t1]
 * holds: t1 its span as settled). */
struct last {
	uint64_t t0, t1, end;
};

static void last_end(struct sp_memtl_reader *m, void *ctx, const struct sp_event *e)
{
	struct last *l = ctx;
	if (m->have_cur && e->start >= l->t0 && e->start <= l->t1 && e->end > l->end)
		l->end = e->end;
}

/* Sets the open window's end and last step if its END was not read. Can't fail (but exits if
 * memory runs out). */
static void settle_end(struct sp_memtl_reader *m)
{
	struct sp_memtl *w = &m->cur;
	struct last l = { w->t0, w->t1, w->t0 };

	if (!m->have_cur || w->complete)
		return;
	for (size_t i = 0; i < m->nsteps; i++) {
		if (m->steps[i].end > l.end)
			l.end = m->steps[i].end;
		if (m->steps[i].u.step.number > w->last_step)
			w->last_step = m->steps[i].u.step.number;
	}
	if (m->nplain)
		replay(m, last_end, &l);
	w->t1 = l.end;
}

/* ---- exported ---- */

struct sp_memtl_reader *sp_memtl_open(struct sp_trace_reader *r, struct sp_sym *sym)
{
	struct sp_memtl_reader *m = calloc(1, sizeof(*m));
	if (!m)
		sp_oom();
	m->r = r;
	m->sym = sym;
	m->end_at = SIZE_MAX;
	m->anchor_mono = sp_trace_header(r)->meta.anchor_mono_ns;
	m->anchor_real = sp_trace_header(r)->meta.anchor_real_ns;
	stretch_begin(m);
	return m;
}

/* The stretch before the BEGIN just read (or the end of the file: next NULL) is settled: the
 * open window built (if any), what belongs to next kept. Returns 1 if a window is ready. */
static int settle_stretch(struct sp_memtl_reader *m, const struct sp_memtl *next)
{
	int had = m->have_cur;
	settle(m, next);
	if (had) {
		uint64_t t1 = m->cur.t1; /* the span its records were settled by */
		settle_end(m);
		sp_memtl_build(m, t1, next);
	} else if (next && m->nplain) {
		sp_memtl_pass(m, 0, 0, next, NULL, NULL); /* no window: only what is next's */
	}
	free(m->carried); /* what the stretch kept for next goes first in next's */
	m->carried = next ? m->next_carried : NULL;
	m->ncarried = m->carried_cap = next ? m->nnext_carried : 0;
	if (!next)
		free(m->next_carried);
	m->next_carried = NULL, m->nnext_carried = 0;
	m->have_cur = next != NULL;
	if (next)
		m->cur = *next;
	stretch_begin(m);
	return had;
}

int sp_memtl_next(struct sp_memtl_reader *m, const struct sp_memtl **w)
{
	struct sp_event ev;

	while (!m->done) {
		int rc = sp_trace_next(m->r, &ev);
		sp_cli_progress(m->r);
		if (rc <= 0 || ev.kind == SP_EV_WINDOW_BEGIN) {
			struct sp_memtl next = { .t1 = UINT64_MAX };
			if (rc > 0) {
				next.id = ev.u.window.id;
				next.t0 = ev.start;
				next.first_step = next.last_step = ev.u.window.first_step;
				next.anchor_mono = m->anchor_mono, next.anchor_real = m->anchor_real;
			} else {
				m->done = 1;
				m->rc = rc;
			}
			if (settle_stretch(m, rc > 0 ? &next : NULL)) {
				*w = &m->out;
				return 1;
			}
			continue;
		}
		m->nrec++;
		switch (ev.kind) {
		case SP_EV_WINDOW_END:
			if (m->have_cur && !m->cur.complete && ev.u.window.id == m->cur.id) {
				m->cur.complete = 1;
				m->cur.t1 = ev.start;
				m->cur.last_step = ev.u.window.last_step;
				m->end_at = m->nheld;
			}
			break;
		case SP_EV_ALLOC:
		case SP_EV_FREE:
			if (is_plain(&ev))
				count_plain(m, &ev);
			else
				push_ev(&m->held, &m->nheld, &m->heldcap, &ev);
			break;
		case SP_EV_STEP:
			push_ev(&m->held, &m->nheld, &m->heldcap, &ev);
			break;
		case SP_EV_CLOCK: /* written at a window's end: the pair nearest to it */
			m->anchor_mono = ev.start, m->anchor_real = ev.u.clock.realtime_ns;
			if (m->have_cur && !m->cur.complete)
				m->cur.anchor_mono = ev.start, m->cur.anchor_real = ev.u.clock.realtime_ns;
			break;
		case SP_EV_MODULE:
			if (m->sym)
				sp_sym_add_module(m->sym, sp_trace_string(m->r, ev.name), ev.u.module.start,
						  ev.u.module.end, ev.u.module.offset);
			break;
		case SP_EV_DEVICE:
			if (ev.device < MAX_DEVICES)
				m->devname[ev.device] = ev.name;
			break;
		}
	}
	return m->rc;
}

void sp_memtl_close(struct sp_memtl_reader *m)
{
	if (!m)
		return;
	sp_memtl_out_free(m);
	free(m->thin);
	free(m->held);
	free(m->carried);
	free(m->next_carried);
	free(m->cp);
	free(m->snap);
	free(m->peak);
	free(m->steps);
	free(m->keys.slot);
	free(m->top);
	free(m->owner_of);
	free(m);
}
const char *sp_memtl_bytes(char *buf, size_t n, uint64_t b)
{
	if (b < 1024)
		snprintf(buf, n, "%" PRIu64 "B", b);
	else if (b < 1024 * 1024)
		snprintf(buf, n, "%.2fKiB", b / 1024.0);
	else if (b < 1024ull * 1024 * 1024)
		snprintf(buf, n, "%.2fMiB", b / 1048576.0);
	else
		snprintf(buf, n, "%.2fGiB", b / 1073741824.0);
	return buf;
}

/* The summary's lines on who made the blocks of GPU series s: per owner, its bytes alive at the
 * peak and its own peak in the window (the caching allocator's is what torch's
 * max_memory_reserved counts, if the window holds the program's peak). */
static void owners_summary(const struct sp_memtl *w, const struct sp_memtl_series *s, const struct sp_trace_reader *r,
			   struct sp_sym *sym, FILE *out)
{
	struct sp_memtl_owned o;
	char b[2][32];
	uint64_t all = 0;
	sp_memtl_owners(w, s, r, sym, &o);
	for (int k = 0; k < SP_OWNER__N; k++)
		all += o.blocks[k];
	if (!all)
		return;
	if (o.blocks[SP_OWNER_UNKNOWN] == all) {
		fprintf(out, "    by owner: unknown for every block (first: %s)%s\n", o.unknown_why,
			strcmp(o.unknown_why, "no stack") ? ""
							  : ": record with [activities] stacks on to tell PyTorch's "
							    "caching allocator from NCCL, cuBLAS and the rest");
		return;
	}
	fprintf(out, "    by owner (the library that allocated each block, from its stack): at the peak, own peak\n");
	for (int k = 1; k <= SP_OWNER__N; k++) {
		int q = k % SP_OWNER__N; /* unknown last */
		if (!o.blocks[q])
			continue;
		fprintf(out, "      %-34s %10s (%" PRIu64 " block%s), own peak %s%s%s%s\n", sp_memtl_owner_label(q),
			sp_memtl_bytes(b[0], 32, o.at_peak[q]), o.blocks_at_peak[q], sp_plural(o.blocks_at_peak[q]),
			sp_memtl_bytes(b[1], 32, o.peak[q]),
			q == SP_OWNER_TORCH_CACHE ? ": beside torch.cuda.max_memory_reserved()" : "",
			q ? "" : "; first: ", q ? "" : o.unknown_why);
	}
}

void sp_memtl_summary(const struct sp_memtl *w, const struct sp_trace_reader *r, struct sp_sym *sym, int top, FILE *out)
{
	char b[2][32], t[32];

	fprintf(out, "Window %u: steps %" PRId64 "-%" PRId64 ", %s", w->id, w->first_step, w->last_step,
		sp_fmt_ns(t, sizeof(t), w->t1 - w->t0));
	if (w->complete)
		fputc('\n', out);
	else
		fprintf(out, " (incomplete: cut at step %" PRId64 ")\n", w->last_step);
	if (!w->ns)
		fprintf(out, "  no memory records\n");
	for (size_t k = 0; k < w->ns; k++) {
		const struct sp_memtl_series *s = &w->s[k];
		uint64_t sum = 0;
		fprintf(out, "  %s: peak %s at %s", s->label, sp_memtl_bytes(b[0], 32, s->peak),
			sp_fmt_sns(t, sizeof(t), (int64_t)(s->peak_t - w->t0)));
		for (size_t i = 0; i < w->nstep; i++)
			if (s->peak_t >= w->step[i].start && s->peak_t < w->step[i].end) {
				fprintf(out, " (step %" PRId64 ")", w->step[i].number);
				break;
			}
		if (s->peak_ever)
			fprintf(out, ", peak since process start %s", sp_memtl_bytes(b[0], 32, s->peak_ever));
		for (size_t i = 0; i < s->n_at_peak; i++)
			sum += w->a[s->at_peak[i]].size;
		fprintf(out, "; %" PRIu64 " allocation%s, %" PRIu64 " free%s in the window\n", s->allocs,
			sp_plural(s->allocs), s->frees, sp_plural(s->frees));
		fprintf(out, "    alive at the peak: %zu allocation%s, %s\n", s->n_at_peak, sp_plural(s->n_at_peak),
			sp_memtl_bytes(b[1], 32, sum));
		if (s->device != SP_NO_DEVICE)
			owners_summary(w, s, r, sym, out);
		for (size_t i = 0; i < s->n_at_peak && (int)i < top; i++) {
			const struct sp_memtl_alloc *a = &w->a[s->at_peak[i]];
			uint32_t n = 0;
			const uint64_t *pcs = a->stack ? sp_trace_stack(r, a->stack, &n) : NULL;
			char why[128], own[160] = "";
			if (s->device != SP_NO_DEVICE) {
				int q = sp_memtl_owner(sym, pcs, pcs ? n : 0, why, sizeof(why));
				snprintf(own, sizeof(own), "  [%s%s%s]", sp_memtl_owner_label(q), q ? "" : ": ",
					 q ? "" : why);
			}
			fprintf(out, "    %10s  %-12s made %s  %s%s\n", sp_memtl_bytes(b[0], 32, a->size),
				sp_mem_kind_name(a->kind), sp_fmt_sns(t, sizeof(t), (int64_t)(a->made - w->t0)),
				sp_sym_site(sym, pcs, n), own);
		}
		if (s->n_at_peak > (size_t)top)
			fprintf(out, "    ... %zu more\n", s->n_at_peak - (size_t)top);
	}
}
