/* SPDX-License-Identifier: MIT */
/* export_chrome_index.c - the Chrome exporter's indexes of a window, built in one pass over its
 * events in file order before they are written in a pass by start: which correlation ids have a
 * call and GPU work (flows only where both ends exist), the device of each CUDA context, the
 * steps (a step is cut where the next on its thread starts), the NCCL calls and the CUDA calls
 * made inside them (an NCCL kernel's collective), and the tracks and processes the events name,
 * each with its first event in the written order, so they are named in that order. Memory: a byte
 * per correlation id, and what is few per window (steps, NCCL calls, tracks); never its events. */
#include "export_chrome.h"

/* ---- orders ---- */

/* Start ascending, then end descending (an enclosing slice before what it encloses, as viewers
 * nest slices of a track in file order at equal times), then file order (a's and b's places). */
static int cmp_order_seq(const struct sp_event *a, uint64_t sa, const struct sp_event *b, uint64_t sb)
{
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	return sp_cmp_u64(sa, sb);
}

/* NCCL calls (pointers into the window's list, file order) by thread, then as written. */
static int cmp_tid_start(const void *pa, const void *pb)
{
	const struct sp_event *a = *(const struct sp_event *const *)pa, *b = *(const struct sp_event *const *)pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return cmp_order_seq(a, (uintptr_t)a, b, (uintptr_t)b);
}

static int cmp_seq_step(const void *pa, const void *pb)
{
	const struct seq_step *a = pa, *b = pb;
	return cmp_order_seq(&a->e, a->seq, &b->e, b->seq);
}

/* ---- correlation ids ---- */

/* Sets up k for the window's correlation ids (those g's stretch of the file carries): flags by id
 * when the ids are dense (they count up as the program runs: one byte per id, read in about the
 * order written), hash sets otherwise. Exits if memory runs out. */
static void corrs_reset(struct corrs *k, const struct sp_windows *g, uint64_t events)
{
	uint32_t lo = 0, hi = 0;
	uint64_t n = sp_windows_corr_range(g, &lo, &hi);

	for (int b = 0; b < 4; b++)
		sp_idset_clear(&k->set[b]);
	k->lo = lo;
	k->n = n && (uint64_t)hi - lo < 4 * events + 65536 ? (size_t)(hi - lo) + 1 : 0;
	if (k->n > k->cap) {
		k->cap = k->n;
		k->flags = sp_xrealloc(k->flags, k->cap);
	}
	if (k->n)
		memset(k->flags, 0, k->n);
}

/* 1 if id (not 0) has flag bit. This function can't fail. */
int sp_chrome_corrs_has(const struct corrs *k, uint32_t id, unsigned bit)
{
	if (!k->n)
		return sp_idset_has(&k->set[__builtin_ctz(bit)], id);
	return id >= k->lo && id - k->lo < k->n && (k->flags[id - k->lo] & bit);
}

/* Sets flag bit of id (an id of the window, not 0). Returns 1 if it was not set. Exits if memory
 * runs out. */
int sp_chrome_corrs_add(struct corrs *k, uint32_t id, unsigned bit)
{
	if (!k->n)
		return sp_idset_add(&k->set[__builtin_ctz(bit)], id);
	if (id < k->lo || id - k->lo >= k->n || (k->flags[id - k->lo] & bit))
		return 0;
	k->flags[id - k->lo] |= (uint8_t)bit;
	return 1;
}

/* The device of a GPU or sync record: its own, else the device of its CUDA context in this
 * window, else the window's only device; -1 if none of these is known. */
static int device_of_context(const struct chrome *c, uint32_t context)
{
	for (size_t i = 0; context && i < c->nctx; i++)
		if (c->ctx[i].context == context)
			return c->ctx[i].device;
	return c->only_dev;
}

int sp_chrome_device_of(const struct chrome *c, const struct sp_event *e)
{
	return e->device != SP_NO_DEVICE ? e->device : device_of_context(c, e->context);
}

/* ---- NCCL calls and the launches made in them ---- */

static void call_map_put(struct call_map *m, uint32_t corr, const struct sp_event *call)
{
	if (2 * (m->n + 1) > m->cap) {
		struct call_map old = *m;
		m->cap = m->cap ? 2 * m->cap : 64;
		m->key = calloc(m->cap, sizeof(*m->key));
		m->call = calloc(m->cap, sizeof(*m->call));
		if (!m->key || !m->call)
			sp_oom();
		m->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.key[i])
				call_map_put(m, old.key[i], old.call[i]);
		free(old.key);
		free(old.call);
	}
	size_t i = (corr * 2654435761u) & (m->cap - 1);
	while (m->key[i] && m->key[i] != corr)
		i = (i + 1) & (m->cap - 1);
	m->n += !m->key[i];
	m->key[i] = corr;
	m->call[i] = call;
}

const struct sp_event *sp_chrome_call_map_get(const struct call_map *m, uint32_t corr)
{
	if (!m->n || !corr)
		return NULL;
	for (size_t i = (corr * 2654435761u) & (m->cap - 1); m->key[i]; i = (i + 1) & (m->cap - 1))
		if (m->key[i] == corr)
			return m->call[i];
	return NULL;
}

/* The index of the first call of v[0..n) (sorted by thread, start) after (tid, t). */
static size_t call_after(const struct sp_event *const *v, size_t n, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid]->tid < tid || (v[mid]->tid == tid && v[mid]->start <= t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The NCCL call written on thread tid whose span holds t, or NULL. */
static const struct sp_event *enclosing_call(const struct chrome *c, uint32_t tid, uint64_t t)
{
	size_t lo = call_after(c->ncall, c->nncall, tid, t);

	for (size_t i = lo, k = 0; i-- > 0 && c->ncall[i]->tid == tid && k < 4; k++) /* calls seldom nest */
		if (c->ncall[i]->end >= t)
			return c->ncall[i];
	return NULL;
}

/* 1 if some NCCL call of the window on thread tid holds t (the calls written are some of them). */
static int in_some_call(const struct chrome *c, uint32_t tid, uint64_t t)
{
	size_t i = call_after(c->wcall, c->nwcall, tid, t);
	return i && c->wcall[i - 1]->tid == tid && c->wcall_end[i - 1] >= t;
}

/* ---- tracks and processes named ---- */

static size_t use_slot(const struct chrome *c, uint8_t kind, uint32_t a, uint32_t b)
{
	size_t h = ((a * 2654435761u) ^ (b * 40503u) ^ kind) & (c->uses_cap - 1);
	while (c->uses[h].seq && (c->uses[h].kind != kind || c->uses[h].a != a || c->uses[h].b != b))
		h = (h + 1) & (c->uses_cap - 1);
	return h;
}

/* Event e (seq: its place, from 1) names the track or process (kind, a, b). Exits if memory runs out. */
static void use(struct chrome *c, uint8_t kind, uint32_t a, uint32_t b, const struct sp_event *e, uint64_t seq)
{
	struct track_use *u = c->uses_cap ? &c->uses[c->use_last] : NULL;

	if (!u || !u->seq || u->kind != kind || u->a != a || u->b != b) {
		if (2 * (c->nuses + 1) > c->uses_cap) {
			struct track_use *old = c->uses;
			size_t cap = c->uses_cap;
			c->uses_cap = cap ? 2 * cap : 64;
			c->uses = calloc(c->uses_cap, sizeof(*c->uses));
			if (!c->uses)
				sp_oom();
			for (size_t i = 0; i < cap; i++)
				if (old[i].seq)
					c->uses[use_slot(c, old[i].kind, old[i].a, old[i].b)] = old[i];
			free(old);
		}
		c->use_last = use_slot(c, kind, a, b);
		u = &c->uses[c->use_last];
	}
	if (!u->seq) {
		*u = (struct track_use){ kind, a, b, e->start, e->end, seq };
		c->nuses++;
	} else if (e->start < u->start || (e->start == u->start && e->end > u->end)) {
		u->start = e->start, u->end = e->end, u->seq = seq; /* seq only grows: no tie to break */
	}
}

/* What e names when written (sp_chrome_gpu_event and the other writers). */
static void uses_of(struct chrome *c, const struct sp_event *e, uint64_t seq)
{
	if (sp_ev_is_gpu(e)) {
		if (e->device != SP_NO_DEVICE)
			use(c, USE_GPU_DEV, e->device, e->stream, e, seq);
		else
			use(c, USE_GPU_CTX, e->context, e->stream, e, seq);
	} else if (e->kind == SP_EV_ALLOC || e->kind == SP_EV_FREE) {
		if (e->device != SP_NO_DEVICE)
			use(c, USE_PROCESS, e->device, 0, e, seq);
	} else if (e->kind != SP_EV_DROPPED && e->kind != SP_EV_SYNC) {
		use(c, USE_CPU, e->tid, 0, e, seq);
	}
}

/* One naming, at the first event that needs it: a process before the track of the same event. */
struct naming {
	const struct track_use *u;
	int track;              /* 0: the GPU process (USE_GPU_*, USE_PROCESS) or CPU thread, 1: the stream */
};

static int cmp_naming(const void *pa, const void *pb)
{
	const struct naming *a = pa, *b = pb;
	struct sp_event ea = { .start = a->u->start, .end = a->u->end }, eb = { .start = b->u->start, .end = b->u->end };
	int d = cmp_order_seq(&ea, a->u->seq, &eb, b->u->seq);
	return d ? d : a->track - b->track;
}

void sp_chrome_name_tracks(struct sp_export *x)
{
	struct chrome *c = x->priv;
	struct naming *v = sp_xrealloc(NULL, (2 * c->nuses + 1) * sizeof(*v));
	size_t n = 0;

	sp_chrome_name_process(x, cpu_pid(x), -1);
	for (size_t i = 0; i < c->uses_cap; i++)
		if (c->uses[i].seq) {
			v[n++] = (struct naming){ &c->uses[i], 0 };
			if (c->uses[i].kind == USE_GPU_DEV || c->uses[i].kind == USE_GPU_CTX)
				v[n++] = (struct naming){ &c->uses[i], 1 };
		}
	sp_sort(v, n, sizeof(*v), cmp_naming);
	for (size_t i = 0; i < n; i++) {
		const struct track_use *u = v[i].u;
		int dev = u->kind == USE_GPU_CTX ? device_of_context(c, u->a) : (int)u->a;
		if (u->kind == USE_CPU)
			sp_chrome_name_track(x, cpu_pid(x), u->a, 0);
		else if (!v[i].track)
			sp_chrome_gpu_process(x, dev);
		else
			sp_chrome_name_track(x, gpu_pid(x, dev), u->b, 1);
	}
	free(v);
}

/* ---- the pass ---- */

void sp_chrome_index_begin(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;

	corrs_reset(&c->corrs, x->g, w->events);
	c->seq = 0;
	c->first_start = UINT64_MAX;
	c->used = 0;
	c->has_nccl = 0;
	c->nctx = c->nsteps = c->nncall = c->nlaunches = c->step_at = c->step_seen = 0;
	c->only_dev = -2;
	if (c->calls.n) {
		memset(c->calls.key, 0, c->calls.cap * sizeof(*c->calls.key));
		c->calls.n = 0;
	}
	if (c->nuses)
		memset(c->uses, 0, c->uses_cap * sizeof(*c->uses));
	c->nuses = c->use_last = 0;
	c->nwcall = 0;
	for (size_t i = 0; i < w->nnccl; i++) {
		c->wcall = sp_xgrow(c->wcall, &c->wcall_cap, sizeof(*c->wcall), c->nwcall);
		c->wcall[c->nwcall++] = &w->nccl[i];
	}
	sp_sort(c->wcall, c->nwcall, sizeof(*c->wcall), cmp_tid_start);
	c->wcall_end = sp_xgrow(c->wcall_end, &c->wcall_end_cap, sizeof(*c->wcall_end), c->nwcall);
	for (size_t i = 0; i < c->nwcall; i++) { /* the latest end on the thread so far */
		uint64_t e = c->wcall[i]->end;
		c->wcall_end[i] = i && c->wcall[i - 1]->tid == c->wcall[i]->tid && c->wcall_end[i - 1] > e
					  ? c->wcall_end[i - 1]
					  : e;
	}
}

/* A GPU record with a time: its flow end and the device of its context. */
static void index_gpu(struct chrome *c, const struct sp_event *e)
{
	if (e->corr)
		sp_chrome_corrs_add(&c->corrs, e->corr, CORR_GPU);
	if (e->device == SP_NO_DEVICE)
		return;
	size_t k = 0;
	while (k < c->nctx && c->ctx[k].context != e->context)
		k++;
	if (k == c->nctx && e->context) {
		c->ctx = sp_xgrow(c->ctx, &c->ctx_cap, sizeof(*c->ctx), c->nctx);
		c->ctx[c->nctx++] = (struct ctxdev){ e->context, e->device };
	}
	c->only_dev = c->only_dev == -2 || c->only_dev == e->device ? e->device : -1;
}

void sp_chrome_index_event(void *ctx, const struct sp_event *e)
{
	struct sp_export *x = ctx;
	struct chrome *c = x->priv;
	uint64_t seq = ++c->seq;

	uses_of(c, e, seq);
	if (e->end >= e->start && e->start < c->first_start &&
	    !(e->kind == SP_EV_ALLOC && (e->u.mem.flags & SP_MEMF_SNAPSHOT)))
		c->first_start = e->start;
	if (sp_ev_is_gpu(e) && e->device < 64)
		c->used |= 1ull << e->device;
	c->has_nccl |= e->kind == SP_EV_NCCL;
	if (e->kind == SP_EV_STEP) {
		c->steps_in = sp_xgrow(c->steps_in, &c->steps_in_cap, sizeof(*c->steps_in), c->nsteps);
		c->steps_in[c->nsteps++] = (struct seq_step){ *e, seq };
	}
	if (e->kind == SP_EV_API && e->corr && in_some_call(c, e->tid, e->start)) {
		c->launches = sp_xgrow(c->launches, &c->launches_cap, sizeof(*c->launches), c->nlaunches);
		c->launches[c->nlaunches++] = (struct launch){ e->corr, e->tid, e->start };
	}
	if (e->end < e->start)
		return; /* not written: no flow may end there */
	if (e->kind == SP_EV_API && e->corr)
		sp_chrome_corrs_add(&c->corrs, e->corr, CORR_API);
	else if (sp_ev_is_gpu(e))
		index_gpu(c, e);
	else if (e->kind == SP_EV_NCCL) {
		c->ncall_ev = sp_xgrow(c->ncall_ev, &c->ncall_ev_cap, sizeof(*c->ncall_ev), c->nncall);
		c->ncall_ev[c->nncall++] = *e;
	}
}

void sp_chrome_index_end(struct sp_export *x)
{
	struct chrome *c = x->priv;
	struct seq_step *v = c->steps_in;

	if (c->only_dev == -2)
		c->only_dev = -1;
	sp_sort(v, c->nsteps, sizeof(*v), cmp_seq_step);
	c->steps = sp_xgrow(c->steps, &c->steps_cap, sizeof(*c->steps), c->nsteps);
	for (size_t i = 0; i < c->nsteps; i++)
		c->steps[i] = v[i].e;
	c->ncall = sp_xgrow(c->ncall, &c->ncall_cap, sizeof(*c->ncall), c->nncall);
	for (size_t i = 0; i < c->nncall; i++)
		c->ncall[i] = &c->ncall_ev[i];
	if (!c->nncall)
		return;
	sp_sort(c->ncall, c->nncall, sizeof(*c->ncall), cmp_tid_start);
	for (size_t i = 0; i < c->nncall; i++)
		if (c->ncall[i]->corr)
			call_map_put(&c->calls, c->ncall[i]->corr, c->ncall[i]);
	for (size_t i = 0; i < c->nlaunches; i++) {
		const struct launch *l = &c->launches[i];
		const struct sp_event *call;
		if (!sp_chrome_call_map_get(&c->calls, l->corr) && (call = enclosing_call(c, l->tid, l->start)))
			call_map_put(&c->calls, l->corr, call);
	}
}

void sp_chrome_index_free(struct chrome *c)
{
	for (int b = 0; b < 4; b++)
		sp_idset_free(&c->corrs.set[b]);
	free(c->corrs.flags);
	free(c->calls.key);
	free(c->calls.call);
	free(c->ctx);
	free(c->steps);
	free(c->steps_in);
	free(c->ncall);
	free(c->ncall_ev);
	free(c->launches);
	free(c->wcall);
	free(c->wcall_end);
	free(c->uses);
}
