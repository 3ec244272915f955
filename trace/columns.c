/* SPDX-License-Identifier: MIT */
/* columns.c - the content of a version-5 chunk (docs/FORMAT.md, "Chunk content, version 5"): its
 * records split into columns that zstd compresses well, each event coded against a template of
 * the chunk (the fields its records repeat: name, shape, stream, thread...) and its times and
 * correlation id against predictions from the template's last record and its lane (its thread,
 * or its GPU stream). The writer (sp_enc_*) and the reader (sp_chunk_*) share the prediction code
 * below, so the two cannot drift apart. A chunk still decodes on its own: every template and
 * prediction starts afresh in each. Pure: no file, no message. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "layout.h"

enum {
	COL_KIND,       /* one kind byte per record */
	COL_BODY,       /* string, stack and Python frame records after their kind byte; template
			 * definitions; every event's value fields */
	COL_TMPL,       /* per event: its template's index (the next unused index defines one) */
	COL_CORR,       /* per event: 0 for no correlation id, else 1 + zigzag(id - predicted) */
	COL_TIME,       /* per event, CPU records then GPU records (6 columns each): start -
			 * predicted in quanta (zigzag: low byte; the rest, varint), its remainder
			 * (zigzag varint, only with a quantum above 1), then the same for duration */
	COL__COUNT = COL_TIME + 12
};

/* A template: the fields that the chunk's records of it repeat, and their last times. */
struct tmpl {
	struct sp_event key;    /* kind and template fields; every other byte 0 */
	uint64_t gap;           /* its last record's start minus its lane's base then */
	uint64_t dur;           /* its last record's duration */
	uint32_t stride;        /* its last correlation id minus its class's previous one */
	uint16_t lane;
	uint8_t gpu;            /* time class: 1 for GPU records (kernel, memcpy, memset) */
};

/* A lane: the records of one thread (CPU class) or GPU stream (GPU class). */
struct lane {
	uint64_t key;           /* thread id, or 1 << 63 | device << 32 | stream */
	uint64_t start, end;    /* of its last record */
};

/* What writer and reader both know at a place in a chunk. */
struct state {
	struct tmpl *t;
	uint32_t nt, tcap;      /* templates defined, allocated */
	struct lane lane[MAX_LANES];
	uint32_t nlane;
	uint64_t prev_start;    /* start of the chunk's previous event (a new lane starts there) */
	uint32_t corr[2];       /* last nonzero correlation id of each class */
	uint8_t qlog[2];        /* time quantum of each class: 1 << qlog ns */
};

/* This function can't fail. */
static void state_reset(struct state *s)
{
	s->nt = s->nlane = 0;
	s->prev_start = 0;
	s->corr[0] = s->corr[1] = 0;
}

/* The lane of template key (class gpu), added if new; lane 0 once MAX_LANES are taken. */
static uint16_t lane_of(struct state *s, const struct sp_event *key, int gpu)
{
	uint64_t k = gpu ? 1ull << 63 | (uint64_t)key->device << 32 | key->stream : key->tid;
	for (uint32_t i = 0; i < s->nlane; i++)
		if (s->lane[i].key == k)
			return (uint16_t)i;
	if (s->nlane == MAX_LANES)
		return 0;
	s->lane[s->nlane] = (struct lane){ k, s->prev_start, s->prev_start };
	return (uint16_t)s->nlane++;
}

/* Defines the next template as key. Returns its index, or -1 with errno ENOMEM, or when the
 * chunk has MAX_TEMPLATES (nothing changed then). */
static int tmpl_add(struct state *s, const struct sp_event *key)
{
	if (s->nt == MAX_TEMPLATES) {
		errno = ENOMEM;
		return -1;
	}
	if (s->nt == s->tcap) {
		uint32_t cap = s->tcap ? s->tcap * 2 : 64;
		struct tmpl *t = realloc(s->t, cap * sizeof(*t));
		if (!t)
			return -1;
		s->t = t;
		s->tcap = cap;
	}
	struct tmpl *t = &s->t[s->nt];
	memset(t, 0, sizeof(*t));
	t->key = *key;
	t->gpu = (uint8_t)sp_ev_is_gpu(key);
	t->lane = lane_of(s, key, t->gpu);
	return (int)s->nt++;
}

/* The predicted start of a record of t is its lane's base plus t's gap: a GPU stream's work
 * follows the end of its last, a thread's calls the start of its last. */
static uint64_t lane_base(const struct state *s, const struct tmpl *t)
{
	const struct lane *l = &s->lane[t->lane];
	return t->gpu ? l->end : l->start;
}

/* Learns from a record of t that ran start..end. This function can't fail. */
static void learn(struct state *s, struct tmpl *t, uint64_t start, uint64_t end)
{
	struct lane *l = &s->lane[t->lane];
	t->gap = start - lane_base(s, t);
	t->dur = end - start;
	l->start = start;
	l->end = end;
	s->prev_start = start;
}

/* ---- writing ---- */

struct col {
	uint8_t *p;
	size_t len, cap;
};

struct sp_enc {
	struct state s;
	struct col col[COL__COUNT];
	uint32_t *slot;         /* open addressing over the templates: index + 1, 0 empty */
	uint32_t nslot;         /* a power of two, at least twice the templates */
	uint8_t *out;           /* the content, built by sp_enc_finish */
	size_t out_cap;
};

/* Makes room for need more bytes in c. Returns 0, or -1 with errno ENOMEM (c unchanged). */
static int col_reserve(struct col *c, size_t need)
{
	if (c->len + need <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 256;
	while (cap < c->len + need)
		cap *= 2;
	uint8_t *p = realloc(c->p, cap);
	if (!p)
		return -1;
	c->p = p;
	c->cap = cap;
	return 0;
}

static void col_varint(struct col *c, uint64_t v)
{
	c->len = (size_t)(put_varint(c->p + c->len, v) - c->p);
}

/* Stores v as its low byte in c and the rest as a varint in c + 1. */
static void col_num(struct col *c, uint64_t v)
{
#ifdef NOSPLIT
	col_varint(c, v);
#else
	c->p[c->len++] = (uint8_t)v;
	col_varint(c + 1, v >> 8);
#endif
}

/* Stores a time residual r (modulo 2^64) of class cls, duration or start: in quanta, rounded to
 * the nearest, and the remainder when the quantum is above 1. */
static void put_time(struct sp_enc *e, int cls, int dur, uint64_t r)
{
	struct col *c = &e->col[COL_TIME + 6 * cls + 3 * dur];
	unsigned k = e->s.qlog[cls];
	if (!k) {
		col_num(c, zigzag((int64_t)r));
		return;
	}
	uint64_t half = 1ull << (k - 1), u = r + half;
	int64_t q = u >> 63 ? -(int64_t)(~u >> k) - 1 : (int64_t)(u >> k); /* floor(u / 2^k), signed */
	col_num(c, zigzag(q));
	col_varint(c + 2, zigzag((int64_t)(u & ((1ull << k) - 1)) - (int64_t)half));
}

static uint64_t key_hash(const struct sp_event *key)
{
	uint64_t w[SP_EVENT_SIZE / 8], h = 0;
	memcpy(w, key, sizeof(w));
	for (size_t i = 0; i < SP_EVENT_SIZE / 8; i++) {
		h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return h;
}

/* The slot of key: holding it, or empty. This function can't fail. */
static uint32_t slot_of(const struct sp_enc *e, const struct sp_event *key)
{
	uint32_t i = (uint32_t)key_hash(key) & (e->nslot - 1);
	while (e->slot[i] && memcmp(&e->s.t[e->slot[i] - 1].key, key, sizeof(*key)))
		i = (i + 1) & (e->nslot - 1);
	return i;
}

/* Room in the slot table for one more template. Returns 0, or -1 with errno ENOMEM. */
static int slots_reserve(struct sp_enc *e)
{
	if ((e->s.nt + 1) * 2 <= e->nslot)
		return 0;
	uint32_t n = e->nslot ? e->nslot * 2 : 256, *old = e->slot, nold = e->nslot;
	if (!(e->slot = calloc(n, sizeof(*e->slot)))) {
		e->slot = old;
		return -1;
	}
	e->nslot = n;
	for (uint32_t i = 0; i < nold; i++)
		if (old[i])
			e->slot[slot_of(e, &e->s.t[old[i] - 1].key)] = old[i];
	free(old);
	return 0;
}

struct sp_enc *sp_enc_new(void)
{
	struct sp_enc *e = calloc(1, sizeof(*e));
	if (e)
		e->s.qlog[1] = GPU_QUANTUM_LOG;
	return e;
}

/* This function can't fail; e may be NULL. */
void sp_enc_free(struct sp_enc *e)
{
	if (!e)
		return;
	for (int i = 0; i < COL__COUNT; i++)
		free(e->col[i].p);
	free(e->s.t);
	free(e->slot);
	free(e->out);
	free(e);
}

size_t sp_enc_bytes(const struct sp_enc *e)
{
	size_t n = 0;
	for (int i = 0; i < COL__COUNT; i++)
		n += e->col[i].len;
	return n;
}

int sp_enc_full(const struct sp_enc *e)
{
	return e->s.nt >= MAX_TEMPLATES;
}

/* The template of ev (defined in the body column if new). Returns its index, or -1 with errno
 * ENOMEM (nothing changed). The columns have room. */
static int enc_template(struct sp_enc *e, const struct sp_event *ev)
{
	struct sp_event key;
	sp_rec_key(&key, ev);
	if (slots_reserve(e) < 0)
		return -1;
	uint32_t i = slot_of(e, &key);
	if (e->slot[i])
		return (int)e->slot[i] - 1;
	int t = tmpl_add(&e->s, &key);
	if (t < 0)
		return -1;
	e->slot[i] = (uint32_t)t + 1;
	struct col *b = &e->col[COL_BODY];
	b->len = (size_t)(sp_rec_put(b->p + b->len, ev, 0) - b->p);
	return t;
}

int sp_enc_event(struct sp_enc *e, const struct sp_event *ev)
{
	for (int i = 0; i < COL__COUNT; i++)
		if (col_reserve(&e->col[i], i == COL_BODY ? 2 * MAX_EVENT_BYTES : 16) < 0)
			return -1;
	size_t before = sp_enc_bytes(e);
	int i = enc_template(e, ev);
	if (i < 0)
		return -1;
	struct tmpl *t = &e->s.t[i];
	struct state *s = &e->s;
	e->col[COL_KIND].p[e->col[COL_KIND].len++] = ev->kind;
	col_varint(&e->col[COL_TMPL], (uint64_t)i);
	struct col *b = &e->col[COL_BODY];
	b->len = (size_t)(sp_rec_put(b->p + b->len, ev, 1) - b->p);
	if (!ev->corr) {
		col_varint(&e->col[COL_CORR], 0);
	} else {
		uint32_t pred = s->corr[t->gpu] + t->stride;
		col_varint(&e->col[COL_CORR], 1 + zigzag((int32_t)(ev->corr - pred)));
		t->stride = ev->corr - s->corr[t->gpu];
		s->corr[t->gpu] = ev->corr;
	}
	put_time(e, t->gpu, 0, ev->start - (lane_base(s, t) + t->gap));
	put_time(e, t->gpu, 1, (ev->end - ev->start) - t->dur);
	learn(s, t, ev->start, ev->end);
	return (int)(sp_enc_bytes(e) - before);
}

uint8_t *sp_enc_table(struct sp_enc *e, uint8_t kind, size_t need)
{
	if (col_reserve(&e->col[COL_KIND], 1) < 0 || col_reserve(&e->col[COL_BODY], need) < 0)
		return NULL;
	e->col[COL_KIND].p[e->col[COL_KIND].len++] = kind;
	return e->col[COL_BODY].p + e->col[COL_BODY].len;
}

/* This function can't fail. */
void sp_enc_table_end(struct sp_enc *e, const uint8_t *end)
{
	e->col[COL_BODY].len = (size_t)(end - e->col[COL_BODY].p);
}

int sp_enc_finish(struct sp_enc *e, const uint8_t **raw, size_t *len)
{
	size_t need = 3 * 10 + COL__COUNT * 10 + sp_enc_bytes(e);
	if (need > e->out_cap) {
		uint8_t *p = realloc(e->out, need);
		if (!p)
			return -1;
		e->out = p;
		e->out_cap = need;
	}
	uint8_t *p = put_varint(e->out, e->s.qlog[0]);
	p = put_varint(p, e->s.qlog[1]);
	p = put_varint(p, COL__COUNT);
	for (int i = 0; i < COL__COUNT; i++)
		p = put_varint(p, e->col[i].len);
	for (int i = 0; i < COL__COUNT; i++) {
		if (e->col[i].len) /* an empty column may have no buffer yet */
			memcpy(p, e->col[i].p, e->col[i].len);
		p += e->col[i].len;
		e->col[i].len = 0;
	}
	*raw = e->out;
	*len = (size_t)(p - e->out);
	state_reset(&e->s);
	if (e->nslot)
		memset(e->slot, 0, e->nslot * sizeof(*e->slot));
	return 0;
}

/* ---- reading ---- */

struct sp_dec {
	struct state s;
	const uint8_t *col[COL__COUNT], *end[COL__COUNT]; /* cursors; kind and body are the
							    * cursor's own */
};

/* Reads the number col_num stored in column i. Returns 0, or -1 if cut short or too big. */
static int get_num(struct sp_dec *d, int i, uint64_t *v)
{
	uint64_t hi;
	if (d->col[i] == d->end[i] || get_varint(&d->col[i + 1], d->end[i + 1], &hi) < 0 || hi >> 56)
		return -1;
	*v = *d->col[i]++ | hi << 8;
	return 0;
}

/* Reads a time residual put_time stored. Returns 0, or -1 if corrupt. */
static int get_time(struct sp_dec *d, int cls, int dur, uint64_t *r)
{
	int i = COL_TIME + 6 * cls + 3 * dur;
	unsigned k = d->s.qlog[cls];
	uint64_t q, rem = 0;
	if (get_num(d, i, &q) < 0 || (k && get_varint(&d->col[i + 2], d->end[i + 2], &rem) < 0))
		return -1;
	if (!k) {
		*r = (uint64_t)unzigzag(q);
		return 0;
	}
	int64_t half = (int64_t)1 << (k - 1), m = unzigzag(rem);
	if (m < -half || m >= half)
		return -1;
	*r = ((uint64_t)unzigzag(q) << k) + (uint64_t)(m + half) - (uint64_t)half;
	return 0;
}

/* Reads the column directory of a version-5 chunk. Returns 0, or -1 if it does not describe
 * exactly the len bytes at raw. */
static int read_directory(struct sp_chunk_cur *c, const uint8_t *raw, size_t len)
{
	struct sp_dec *d = c->dec;
	const uint8_t *p = raw, *end = raw + len;
	uint64_t q[2], n, l;
	if (get_varint(&p, end, &q[0]) < 0 || get_varint(&p, end, &q[1]) < 0 || get_varint(&p, end, &n) < 0 ||
	    q[0] > MAX_QUANTUM_LOG || q[1] > MAX_QUANTUM_LOG || n != COL__COUNT)
		return -1;
	const uint8_t *at = p;
	for (int i = 0; i < COL__COUNT; i++) /* the lengths first, then the columns they measure */
		if (get_varint(&at, end, &l) < 0)
			return -1;
	for (int i = 0; i < COL__COUNT; i++) {
		get_varint(&p, end, &l);
		if (l > (uint64_t)(end - at))
			return -1;
		d->col[i] = at;
		d->end[i] = at += l;
	}
	if (at != end)
		return -1;
	state_reset(&d->s);
	d->s.qlog[0] = (uint8_t)q[0];
	d->s.qlog[1] = (uint8_t)q[1];
	c->kind = d->col[COL_KIND];
	c->kind_end = d->end[COL_KIND];
	c->body = d->col[COL_BODY];
	c->body_end = d->end[COL_BODY];
	return 0;
}

int sp_chunk_begin(struct sp_chunk_cur *c, const uint8_t *raw, size_t len, unsigned version)
{
	c->version = version;
	c->prev = (struct sp_rec_prev){ 0 };
	if (version < 5) {
		c->kind = c->kind_end = NULL;
		c->body = raw;
		c->body_end = raw + len;
		return 0;
	}
	if (!c->dec && !(c->dec = calloc(1, sizeof(*c->dec))))
		return -2;
	return read_directory(c, raw, len);
}

int sp_chunk_kind(struct sp_chunk_cur *c, uint8_t *kind)
{
	const uint8_t **p = c->version < 5 ? &c->body : &c->kind, *end = c->version < 5 ? c->body_end : c->kind_end;
	if (*p == end)
		return -1;
	*kind = *(*p)++;
	return 0;
}

/* The template a version-5 event names (defining it from the body if new). Returns it, or NULL
 * with *rc -1 if corrupt, -2 out of memory. */
static struct tmpl *dec_template(struct sp_chunk_cur *c, uint8_t kind, int *rc)
{
	struct sp_dec *d = c->dec;
	uint64_t i;
	*rc = -1;
	if (get_varint(&d->col[COL_TMPL], d->end[COL_TMPL], &i) < 0 || i > d->s.nt)
		return NULL;
	if (i == d->s.nt) {
		struct sp_event key = { .kind = kind };
		if (sp_rec_get(&c->body, c->body_end, c->version, &key, 0) < 0)
			return NULL;
		if (d->s.nt == MAX_TEMPLATES)
			return NULL;
		if (tmpl_add(&d->s, &key) < 0) {
			*rc = -2;
			return NULL;
		}
	}
	return d->s.t[i].key.kind == kind ? &d->s.t[i] : NULL;
}

/* Decodes a version-5 event record. Returns 0, -1 if corrupt, -2 out of memory. */
static int dec_event(struct sp_chunk_cur *c, uint8_t kind, struct sp_event *ev)
{
	struct sp_dec *d = c->dec;
	struct state *s = &d->s;
	uint64_t v, rs, rd;
	int rc;
	struct tmpl *t = dec_template(c, kind, &rc);
	if (!t)
		return rc;
	*ev = t->key;
	if (sp_rec_get(&c->body, c->body_end, c->version, ev, 1) < 0 || get_varint(&d->col[COL_CORR], d->end[COL_CORR], &v) < 0 ||
	    v > 1 + (uint64_t)UINT32_MAX)
		return -1;
	if (v) {
		ev->corr = s->corr[t->gpu] + t->stride + (uint32_t)unzigzag(v - 1);
		if (!ev->corr) /* the writer stores no id as 0 */
			return -1;
		t->stride = ev->corr - s->corr[t->gpu];
		s->corr[t->gpu] = ev->corr;
	}
	if (get_time(d, t->gpu, 0, &rs) < 0 || get_time(d, t->gpu, 1, &rd) < 0)
		return -1;
	ev->start = lane_base(s, t) + t->gap + rs;
	ev->end = ev->start + t->dur + rd;
	learn(s, t, ev->start, ev->end);
	return 0;
}

int sp_chunk_event(struct sp_chunk_cur *c, uint8_t kind, struct sp_event *ev)
{
	if (c->version < 5)
		return sp_rec_decode(&c->body, c->body_end, kind, c->version, &c->prev, ev);
	return dec_event(c, kind, ev);
}

int sp_chunk_done(const struct sp_chunk_cur *c)
{
	if (c->body != c->body_end)
		return 0;
	if (c->version < 5)
		return 1;
	for (int i = 0; i < COL__COUNT; i++)
		if (i != COL_KIND && i != COL_BODY && c->dec->col[i] != c->dec->end[i])
			return 0;
	return c->kind == c->kind_end;
}

void sp_chunk_free(struct sp_chunk_cur *c)
{
	if (c->dec)
		free(c->dec->s.t);
	free(c->dec);
	c->dec = NULL;
}
