/* SPDX-License-Identifier: MIT */
/* window_fixture.h - for tests of the window grouper's readers: the events of the window a
 * grouper handed out last, collected in memory by a pass in file order (the readers never hold
 * them; a test may). */
#ifndef SP_WINDOW_FIXTURE_H
#define SP_WINDOW_FIXTURE_H

#include <stdlib.h>
#include "cli/windows.h"

/* A window's events, file order. */
struct fx_events {
	struct sp_event *ev;
	size_t n, cap;
};

static void fx_collect_one(void *ctx, const struct sp_event *e)
{
	struct fx_events *v = ctx;
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 256;
		v->ev = realloc(v->ev, v->cap * sizeof(*v->ev));
		if (!v->ev)
			abort();
	}
	v->ev[v->n++] = *e;
}

/* The events of the window g handed out last into *v (emptied first). */
static inline void fx_collect(struct sp_windows *g, struct fx_events *v)
{
	v->n = 0;
	sp_windows_each(g, fx_collect_one, v);
}

static inline size_t fx_count_kind(const struct fx_events *v, int kind)
{
	size_t n = 0;
	for (size_t i = 0; i < v->n; i++)
		n += v->ev[i].kind == kind;
	return n;
}

#endif
