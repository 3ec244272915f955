/* SPDX-License-Identifier: MIT */
/* evheap.c - see evheap.h. */
#include "evheap.h"

void sp_evheap_up(struct sp_hent *h, size_t i, sp_hless_fn less)
{
	while (i && less(&h[i], &h[(i - 1) / 2])) {
		struct sp_hent t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

struct sp_hent sp_evheap_pop(struct sp_hent *h, size_t *n, sp_hless_fn less)
{
	struct sp_hent top = h[0];
	size_t i = 0, len = --*n;
	h[0] = h[len];
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < len && less(&h[l], &h[m]))
			m = l;
		if (l + 1 < len && less(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			break;
		struct sp_hent t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
	return top;
}
