/* SPDX-License-Identifier: MIT */
/* memtl.c - see memtl.h. Memory and step records are held from one WINDOW_BEGIN to the next
 * and settled then, as windows.c does for the other kinds: a record joins the window if it
 * starts in [t0, t1]. SNAPSHOT records lie before t0 and may be written before their window's
 * BEGIN, or (back-to-back windows) before the previous window's END; one read while window W is
 * open still belongs to the next window if W already has a snapshot of that allocation or if it
 * was made after W opened. PEAK records go to the window they are read in or just after. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "format.h"
#include "memtl.h"
#include "windows.h"

#define MAX_DEVICES 64

/* Key of a live allocation: device and address; VMM handles are kept apart from pointers. */
struct key {
	uint64_t addr;
	uint32_t dev;           /* device | 0x10000 for VMM handles */
};

/* Open-addressing map key -> allocation index. */
struct amap {
	struct {
		struct key k;
		size_t v;
		int used;
	} *slot;
	size_t cap, n;
};

struct sp_memtl_reader {
	struct sp_trace_reader *r;
	struct sp_sym *sym;
	uint32_t devname[MAX_DEVICES]; /* string ids of SP_EV_DEVICE names, 0 none */
	struct sp_event *held;  /* memory and step records read since the open window began */
	size_t nheld, heldcap;
	size_t end_at;          /* held index at which the open window's END was read, or SIZE_MAX */
	int have_cur;           /* a window is open (its BEGIN was read) */
	struct sp_memtl cur;    /* its header fields only */
	struct sp_event *ev, *snap, *peak; /* the settled window: its records, snapshots, peaks */
	size_t nev, nsnap, npeak, evcap, snapcap, peakcap;
	struct amap keys;       /* scratch: snapshot keys, then live allocations */
	struct sp_memtl out;    /* the window handed out */
	int done, rc;
};

static struct key key_of(const struct sp_event *e)
{
	return (struct key){ e->u.mem.addr, e->device | (e->sub == SP_MEM_VMM ? 0x10000u : 0) };
}

static size_t amap_pos(const struct amap *m, struct key k)
{
	size_t i = (size_t)((k.addr ^ ((uint64_t)k.dev << 47)) * 0x9e3779b97f4a7c15ull >> 20) & (m->cap - 1);
	while (m->slot[i].used && (m->slot[i].k.addr != k.addr || m->slot[i].k.dev != k.dev))
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* The value of k, or SIZE_MAX if absent. */
static size_t amap_get(const struct amap *m, struct key k)
{
	if (!m->cap)
		return SIZE_MAX;
	size_t i = amap_pos(m, k);
	return m->slot[i].used ? m->slot[i].v : SIZE_MAX;
}

/* Sets k to v (v = SIZE_MAX: removes k's value, leaving the key). Exits if memory runs out. */
static void amap_put(struct amap *m, struct key k, size_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct amap big = { .cap = m->cap ? m->cap * 2 : 256 };
		big.slot = calloc(big.cap, sizeof(*big.slot));
		if (!big.slot)
			sp_oom();
		for (size_t i = 0; i < m->cap; i++)
			if (m->slot[i].used)
				big.slot[amap_pos(&big, m->slot[i].k)] = m->slot[i];
		big.n = m->n;
		free(m->slot);
		*m = big;
	}
	size_t i = amap_pos(m, k);
	m->n += !m->slot[i].used;
	m->slot[i].used = 1;
	m->slot[i].k = k;
	m->slot[i].v = v;
}

static void amap_clear(struct amap *m)
{
	if (m->n)
		memset(m->slot, 0, m->cap * sizeof(*m->slot));
	m->n = 0;
}

static void push_ev(struct sp_event **a, size_t *n, size_t *cap, const struct sp_event *e)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 256;
		*a = sp_xrealloc(*a, *cap * sizeof(**a));
	}
	(*a)[(*n)++] = *e;
}

static int is_snapshot(const struct sp_event *e)
{
	return e->kind == SP_EV_ALLOC && (e->u.mem.flags & SP_MEMF_SNAPSHOT);
}

static int is_peak(const struct sp_event *e)
{
	return e->kind == SP_EV_ALLOC && (e->u.mem.flags & SP_MEMF_PEAK);
}

/* Splits the held records between the open window (into ev/snap/peak) and next (kept in held;
 * next is NULL at the end of the file); the rest are outside any window. Then next is open. */
static void settle(struct sp_memtl_reader *m, const struct sp_memtl *next)
{
	struct sp_memtl *w = &m->cur;
	size_t kept = 0;

	m->nev = m->nsnap = m->npeak = 0;
	amap_clear(&m->keys);
	if (m->have_cur && !w->complete)
		w->t1 = next ? next->t0 - (next->t0 > w->t0) : UINT64_MAX;
	for (size_t i = 0; i < m->nheld; i++) {
		const struct sp_event *e = &m->held[i];
		int mine;
		if (is_peak(e)) {
			mine = m->have_cur;
		} else if (is_snapshot(e)) {
			mine = m->have_cur && i < m->end_at && e->start <= w->t0 &&
			       amap_get(&m->keys, key_of(e)) == SIZE_MAX;
			if (mine)
				amap_put(&m->keys, key_of(e), 0);
		} else {
			mine = m->have_cur && e->start >= w->t0 && e->start <= w->t1;
		}
		if (mine && is_peak(e))
			push_ev(&m->peak, &m->npeak, &m->peakcap, e);
		else if (mine && is_snapshot(e))
			push_ev(&m->snap, &m->nsnap, &m->snapcap, e);
		else if (mine)
			push_ev(&m->ev, &m->nev, &m->evcap, e);
		else if (next && (is_snapshot(e) || (!is_peak(e) && e->start >= next->t0)))
			m->held[kept++] = *e;
	}
	if (m->have_cur && !w->complete) {
		w->t1 = w->t0;
		for (size_t i = 0; i < m->nev; i++) {
			if (m->ev[i].end > w->t1)
				w->t1 = m->ev[i].end;
			if (m->ev[i].kind == SP_EV_STEP && m->ev[i].u.step.number > w->last_step)
				w->last_step = m->ev[i].u.step.number;
		}
	}
	m->nheld = kept;
	m->end_at = SIZE_MAX;
}

/* qsort order of the window's records: by start, then file order (kept in the pointers). */
static int by_start(const void *a, const void *b)
{
	const struct sp_event *x = *(const struct sp_event *const *)a, *y = *(const struct sp_event *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int by_size_desc(const void *a, const void *b, void *arg)
{
	const struct sp_memtl_alloc *al = arg;
	const struct sp_memtl_alloc *x = &al[*(const size_t *)a], *y = &al[*(const size_t *)b];
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return x->made < y->made ? -1 : x->made > y->made;
}

/* The series of device in out, created (in device order, host last) on first use. */
static struct sp_memtl_series *series_of(struct sp_memtl_reader *m, uint16_t device)
{
	struct sp_memtl *o = &m->out;
	size_t i = 0;
	while (i < o->ns && o->s[i].device < device)
		i++;
	if (i < o->ns && o->s[i].device == device)
		return &o->s[i];
	o->s = sp_xrealloc(o->s, (o->ns + 1) * sizeof(*o->s));
	memmove(&o->s[i + 1], &o->s[i], (o->ns - i) * sizeof(*o->s));
	o->ns++;
	struct sp_memtl_series *s = memset(&o->s[i], 0, sizeof(*o->s));
	s->device = device;
	if (device == SP_NO_DEVICE)
		snprintf(s->label, sizeof(s->label), "host");
	else if (device < MAX_DEVICES && m->devname[device])
		snprintf(s->label, sizeof(s->label), "GPU %u (%s)", device, sp_trace_string(m->r, m->devname[device]));
	else
		snprintf(s->label, sizeof(s->label), "GPU %u", device);
	return s;
}

/* Accounting slot of a device: its ordinal, or MAX_DEVICES for the host (and unknown ordinals). */
static unsigned slot_of(uint16_t device)
{
	return device < MAX_DEVICES ? device : MAX_DEVICES;
}

/* Arrays below grow by doubling when their count reaches a power of two. */
static void add_point(struct sp_memtl_series *s, uint64_t t, uint64_t live, uint64_t seq)
{
	if (!(s->n & (s->n - 1)))
		s->pt = sp_xrealloc(s->pt, (s->n ? s->n * 2 : 1) * sizeof(*s->pt));
	s->pt[s->n++] = (struct sp_memtl_point){ t, live, seq };
}

static size_t add_alloc(struct sp_memtl *o, const struct sp_event *e, uint64_t born)
{
	if (!(o->na & (o->na - 1)))
		o->a = sp_xrealloc(o->a, (o->na ? o->na * 2 : 1) * sizeof(*o->a));
	o->a[o->na] = (struct sp_memtl_alloc){ .addr = e->u.mem.addr,
					       .size = e->u.mem.size,
					       .made = e->start,
					       .freed = SP_MEMTL_NEVER,
					       .born = born,
					       .died = SP_MEMTL_NEVER,
					       .stack = e->u.mem.stack,
					       .device = e->device,
					       .kind = e->sub,
					       .snapshot = born == 0 };
	return o->na++;
}

/* Builds m->out from the settled records of the open window. Exits if memory runs out. */
static void build(struct sp_memtl_reader *m)
{
	struct sp_memtl *o = &m->out;
	const struct sp_event **order = sp_xrealloc(NULL, (m->nev ? m->nev : 1) * sizeof(*order));
	uint64_t seq = 0;

	for (size_t i = 0; i < o->ns; i++) {
		free(o->s[i].pt);
		free(o->s[i].at_peak);
	}
	free(o->a);
	free(o->s);
	free(o->step);
	*o = m->cur;
	o->a = NULL, o->s = NULL, o->step = NULL;
	o->na = o->ns = o->nstep = 0;

	/* level at t0: what the snapshots say (their `live`), else worked back from the first change */
	uint64_t start_level[MAX_DEVICES + 1];
	int has_start[MAX_DEVICES + 1] = { 0 };
	amap_clear(&m->keys);
	for (size_t i = 0; i < m->nsnap; i++) {
		const struct sp_event *e = &m->snap[i];
		amap_put(&m->keys, key_of(e), add_alloc(o, e, 0));
		series_of(m, e->device);
		start_level[slot_of(e->device)] = e->u.mem.live;
		has_start[slot_of(e->device)] = 1;
	}
	for (size_t i = 0; i < m->nev; i++)
		order[i] = &m->ev[i];
	sp_sort(order, m->nev, sizeof(*order), by_start);
	for (size_t i = 0; i < m->nev; i++) {
		const struct sp_event *e = order[i];
		if (e->kind == SP_EV_STEP) {
			if (!(o->nstep & (o->nstep - 1)))
				o->step = sp_xrealloc(o->step, (o->nstep ? o->nstep * 2 : 1) * sizeof(*o->step));
			o->step[o->nstep++] = (struct sp_memtl_step){ e->u.step.number, e->start, e->end };
			continue;
		}
		struct sp_memtl_series *s = series_of(m, e->device);
		size_t live = amap_get(&m->keys, key_of(e));
		seq++;
		if (!s->n) {
			const struct sp_ev_mem *em = &e->u.mem;
			uint64_t before = e->kind == SP_EV_FREE ? em->live + em->size
					  : em->live > em->size ? em->live - em->size
								: 0;
			add_point(s, o->t0, has_start[slot_of(e->device)] ? start_level[slot_of(e->device)] : before,
				  0);
		}
		if (live != SIZE_MAX) { /* freed, or allocated again without a FREE we saw */
			o->a[live].freed = e->start;
			o->a[live].died = seq;
			amap_put(&m->keys, key_of(e), SIZE_MAX);
		}
		if (e->kind == SP_EV_ALLOC) {
			amap_put(&m->keys, key_of(e), add_alloc(o, e, seq));
			s->allocs++;
		} else {
			s->frees++;
		}
		add_point(s, e->start, e->u.mem.live, seq);
	}
	for (size_t i = 0; i < m->npeak; i++) {
		struct sp_memtl_series *s = series_of(m, m->peak[i].device);
		if (m->peak[i].u.mem.live > s->peak_ever)
			s->peak_ever = m->peak[i].u.mem.live;
	}

	/* per series: the level at t0 if no change set it, the peak, the allocations alive then */
	for (size_t k = 0; k < o->ns; k++) {
		struct sp_memtl_series *s = &o->s[k];
		if (!s->n)
			add_point(s, o->t0, has_start[slot_of(s->device)] ? start_level[slot_of(s->device)] : 0, 0);
		s->peak = s->pt[0].live;
		s->peak_t = o->t0;
		s->peak_seq = 0;
		for (size_t i = 1; i < s->n; i++)
			if (s->pt[i].live > s->peak) {
				s->peak = s->pt[i].live;
				s->peak_t = s->pt[i].t;
				s->peak_seq = s->pt[i].seq;
			}
		if (s->peak_ever && s->peak_ever < s->peak)
			s->peak_ever = s->peak;
		for (size_t i = 0; i < o->na; i++) {
			const struct sp_memtl_alloc *a = &o->a[i];
			if (a->device == s->device && a->born <= s->peak_seq && a->died > s->peak_seq) {
				s->at_peak = sp_xrealloc(s->at_peak, (s->n_at_peak + 1) * sizeof(*s->at_peak));
				s->at_peak[s->n_at_peak++] = i;
			}
		}
		sp_sort_r(s->at_peak, s->n_at_peak, sizeof(*s->at_peak), by_size_desc, o->a);
	}
	free(order);
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
	return m;
}

int sp_memtl_next(struct sp_memtl_reader *m, const struct sp_memtl **w)
{
	struct sp_event ev;

	while (!m->done) {
		int rc = sp_trace_next(m->r, &ev);
		sp_cli_progress(m->r);
		if (rc <= 0 || ev.kind == SP_EV_WINDOW_BEGIN) {
			struct sp_memtl next = { .t1 = UINT64_MAX };
			int had = m->have_cur;
			if (rc > 0) {
				next.id = ev.u.window.id;
				next.t0 = ev.start;
				next.first_step = next.last_step = ev.u.window.first_step;
			} else {
				m->done = 1;
				m->rc = rc;
			}
			settle(m, rc > 0 ? &next : NULL);
			if (had)
				build(m);
			m->have_cur = rc > 0;
			m->cur = next;
			if (had) {
				*w = &m->out;
				return 1;
			}
			continue;
		}
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
		case SP_EV_STEP:
			push_ev(&m->held, &m->nheld, &m->heldcap, &ev);
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
	for (size_t i = 0; i < m->out.ns; i++) {
		free(m->out.s[i].pt);
		free(m->out.s[i].at_peak);
	}
	free(m->out.a);
	free(m->out.s);
	free(m->out.step);
	free(m->held);
	free(m->ev);
	free(m->snap);
	free(m->peak);
	free(m->keys.slot);
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

	fprintf(out, "Window %u: steps %" PRId64 "-%" PRId64 ", %s%s\n", w->id, w->first_step, w->last_step,
		sp_fmt_ns(t, sizeof(t), w->t1 - w->t0), w->complete ? "" : " (incomplete)");
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
