/* SPDX-License-Identifier: MIT */
/* intern.c - the process-wide string table behind intern.h: lookups and hits never lock (release-published
 * chunked arrays), a miss appends under one mutex. Nothing is freed or moved, so lock-free readers stay safe. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "intern.h"

#define CHUNK_IDS 4096u                  /* ids per pointer chunk */
#define MAX_CHUNKS 4096u                 /* so at most 16M - 1 ids */
#define FIRST_SLOTS 1024u                /* hash slots of the first table */

/* One open-addressing hash table. A slot is (hash32 << 32 | id), 0 when empty. */
struct table {
	struct table *older;    /* the table this one replaced, kept for readers still in it */
	uint32_t mask;
	_Atomic uint64_t slot[];
};

static struct {
	pthread_mutex_t lock;                       /* taken by appends only */
	_Atomic(const char **) chunk[MAX_CHUNKS];   /* chunk[id / CHUNK_IDS][id % CHUNK_IDS] */
	_Atomic uint32_t count;                     /* ids handed out; release-stored after the pointer */
	_Atomic(struct table *) table;              /* the current hash table, NULL before first use */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* This function can't fail. */
static uint32_t hash(const char *s)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* The string of a published id (1..count). Lock-free; can't fail. */
static const char *string_of(uint32_t id)
{
	return atomic_load_explicit(&g.chunk[id / CHUNK_IDS], memory_order_acquire)[id % CHUNK_IDS];
}

/* Finds s in t. Returns its id, or 0 if t does not hold it. Lock-free. */
static uint32_t find(const struct table *t, const char *s, uint32_t h)
{
	for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
		uint64_t v = atomic_load_explicit(&t->slot[i], memory_order_acquire);
		if (!v)
			return 0;
		if ((uint32_t)(v >> 32) == h && !strcmp(string_of((uint32_t)v), s))
			return (uint32_t)v;
	}
}

/* Inserts (h, id) into t, which has a free slot (load under one half). Lock held. */
static void put(struct table *t, uint32_t h, uint32_t id)
{
	uint32_t i = h & t->mask;
	while (atomic_load_explicit(&t->slot[i], memory_order_relaxed))
		i = (i + 1) & t->mask;
	atomic_store_explicit(&t->slot[i], (uint64_t)h << 32 | id, memory_order_release);
}

/* Returns a table of slots entries holding every id so far, or NULL (out of memory). Lock held. */
static struct table *new_table(uint32_t slots)
{
	struct table *t = calloc(1, sizeof(*t) + slots * sizeof(t->slot[0]));
	if (!t)
		return NULL;
	t->mask = slots - 1;
	uint32_t n = atomic_load_explicit(&g.count, memory_order_relaxed);
	for (uint32_t id = 1; id <= n; id++)
		put(t, hash(string_of(id)), id);
	return t;
}

/* Appends s as a new id (lock held). Returns the id, or 0 if memory or ids ran out. */
static uint32_t append(const char *s, uint32_t h)
{
	struct table *t = atomic_load_explicit(&g.table, memory_order_relaxed);
	uint32_t id = atomic_load_explicit(&g.count, memory_order_relaxed) + 1;
	if (id >= CHUNK_IDS * MAX_CHUNKS)
		return 0;
	if (2 * (id + 1) > t->mask + 1) { /* keep the load under one half */
		struct table *bigger = new_table(2 * (t->mask + 1));
		if (!bigger)
			return 0;
		bigger->older = t;
		atomic_store_explicit(&g.table, bigger, memory_order_release);
		t = bigger;
	}
	const char **c = atomic_load_explicit(&g.chunk[id / CHUNK_IDS], memory_order_relaxed);
	if (!c) {
		if (!(c = calloc(CHUNK_IDS, sizeof(*c))))
			return 0;
		atomic_store_explicit(&g.chunk[id / CHUNK_IDS], c, memory_order_release);
	}
	char *copy = strdup(s);
	if (!copy)
		return 0;
	c[id % CHUNK_IDS] = copy;
	atomic_store_explicit(&g.count, id, memory_order_release);
	put(t, h, id);
	return id;
}

/* Returns the id of s, or 0 if s is NULL or memory ran out (nothing changed then). */
uint32_t sp_intern(const char *s)
{
	if (!s)
		return 0;
	uint32_t h = hash(s), id;
	struct table *t = atomic_load_explicit(&g.table, memory_order_acquire);
	if (t && (id = find(t, s, h)))
		return id;
	pthread_mutex_lock(&g.lock);
	t = atomic_load_explicit(&g.table, memory_order_relaxed);
	if (!t && (t = new_table(FIRST_SLOTS)))
		atomic_store_explicit(&g.table, t, memory_order_release);
	id = t ? find(t, s, h) : 0;
	if (t && !id)
		id = append(s, h);
	pthread_mutex_unlock(&g.lock);
	return id;
}

/* Returns the string of id, or NULL if id is 0 or not handed out yet. Lock-free; can't fail. */
const char *sp_intern_lookup(uint32_t id)
{
	if (!id || id > atomic_load_explicit(&g.count, memory_order_acquire))
		return NULL;
	return string_of(id);
}

/* This function can't fail. */
uint32_t sp_intern_count(void)
{
	return atomic_load_explicit(&g.count, memory_order_acquire);
}
