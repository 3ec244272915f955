/* SPDX-License-Identifier: MIT */
/* memtl_owner.c - who made a device block (memtl.h, sp_memtl_owner): the library of the innermost
 * native frame of its allocation stack that is not the CUDA runtime or driver, CUPTI or stepprof
 * itself (PyTorch's caching allocator lives in libc10_cuda; NCCL and cuBLAS link the runtime
 * statically, so their own frames come first), and the per-owner levels of a window (at its peak,
 * and each owner's own peak), counted as the reader's live pass goes. Reads stacks and module
 * names; never prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memtl_impl.h"
#include "util.h"

static const struct {
	const char *key, *label;
} owners[SP_OWNER__N] = {
	[SP_OWNER_UNKNOWN] = { "unknown", "unknown" },
	[SP_OWNER_TORCH_CACHE] = { "torch_caching_allocator", "PyTorch caching allocator" },
	[SP_OWNER_TORCH] = { "torch_other", "PyTorch, not its caching allocator" },
	[SP_OWNER_NCCL] = { "nccl", "NCCL" },
	[SP_OWNER_CUBLAS] = { "cublas", "cuBLAS" },
	[SP_OWNER_CUDNN] = { "cudnn", "cuDNN" },
	[SP_OWNER_CUDA_LIB] = { "cuda_library", "other CUDA library" },
	[SP_OWNER_OTHER] = { "other", "other library" },
};

/* Module name prefixes, first match wins: the frames to look past, then the owners. */
static const struct {
	const char *prefix;
	int owner; /* -1: not the allocating library (the runtime, the driver, CUPTI, stepprof) */
} modules[] = {
	{ "libcudart", -1 },
	{ "libcuda.so", -1 },
	{ "libcupti", -1 },
	{ "libstepprof", -1 },
	{ "libnvidia-", -1 },
	{ "libc10_cuda", SP_OWNER_TORCH_CACHE },
	{ "libc10", SP_OWNER_TORCH },
	{ "libtorch", SP_OWNER_TORCH },
	{ "_C.", SP_OWNER_TORCH },
	{ "libnccl", SP_OWNER_NCCL },
	{ "libcublas", SP_OWNER_CUBLAS },
	{ "libcudnn", SP_OWNER_CUDNN },
	{ "libcufft", SP_OWNER_CUDA_LIB },
	{ "libcusparse", SP_OWNER_CUDA_LIB },
	{ "libcusolver", SP_OWNER_CUDA_LIB },
	{ "libcurand", SP_OWNER_CUDA_LIB },
	{ "libcutensor", SP_OWNER_CUDA_LIB },
	{ "libnvrtc", SP_OWNER_CUDA_LIB },
	{ "libnvJitLink", SP_OWNER_CUDA_LIB },
	{ "libnvshmem", SP_OWNER_CUDA_LIB },
};

const char *sp_memtl_owner_key(int owner)
{
	return owner >= 0 && owner < SP_OWNER__N ? owners[owner].key : owners[0].key;
}

const char *sp_memtl_owner_label(int owner)
{
	return owner >= 0 && owner < SP_OWNER__N ? owners[owner].label : owners[0].label;
}

int sp_memtl_owner(struct sp_sym *sym, const uint64_t *pcs, uint32_t n, char *why, size_t len)
{
	int native = 0, unmapped = 0;
	if (!n) {
		snprintf(why, len, "no stack");
		return SP_OWNER_UNKNOWN;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (SP_IS_PYFRAME(pcs[i]) || SP_IS_MARK(pcs[i]))
			continue;
		const char *mod = sp_sym_module(sym, pcs[i]);
		native++;
		if (!mod) {
			unmapped++;
			continue;
		}
		size_t k = 0, nk = sizeof(modules) / sizeof(modules[0]);
		while (k < nk && strncmp(mod, modules[k].prefix, strlen(modules[k].prefix)))
			k++;
		if (k < nk && modules[k].owner < 0)
			continue;
		snprintf(why, len, "a frame in %s", mod);
		return k < nk ? modules[k].owner : SP_OWNER_OTHER;
	}
	if (!native)
		snprintf(why, len, "no native frame (stacks = python by a version that kept none)");
	else if (unmapped)
		snprintf(why, len, "no module recorded for its frames");
	else
		snprintf(why, len, "only CUDA runtime and driver frames");
	return SP_OWNER_UNKNOWN;
}

/* Orders (seq, delta) changes by seq, frees first. */
struct change {
	uint64_t seq;
	int64_t delta;
};

static int by_seq(const void *pa, const void *pb)
{
	const struct change *a = pa, *b = pb;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return a->delta < b->delta ? -1 : a->delta > b->delta;
}

void sp_memtl_owners(const struct sp_memtl *w, const struct sp_memtl_series *s, const struct sp_trace_reader *r,
		     struct sp_sym *sym, struct sp_memtl_owned *o)
{
	struct change *c[SP_OWNER__N] = { NULL };
	size_t nc[SP_OWNER__N] = { 0 };
	char why[128];

	memset(o, 0, sizeof(*o));
	if (s->owned) {
		*o = *s->owned;
		return;
	}
	for (size_t i = 0; i < w->na; i++) {
		const struct sp_memtl_alloc *a = &w->a[i];
		uint32_t n = 0;
		const uint64_t *pcs = a->stack ? sp_trace_stack(r, a->stack, &n) : NULL;
		if (a->device != s->device)
			continue;
		int k = sp_memtl_owner(sym, pcs, pcs ? n : 0, why, sizeof(why));
		if (k == SP_OWNER_UNKNOWN && !o->blocks[k])
			snprintf(o->unknown_why, sizeof(o->unknown_why), "%s", why);
		o->blocks[k]++;
		c[k] = sp_xrealloc(c[k], (nc[k] + 2) * sizeof(*c[k]));
		c[k][nc[k]++] = (struct change){ a->born, (int64_t)a->size };
		if (a->died != SP_MEMTL_NEVER)
			c[k][nc[k]++] = (struct change){ a->died, -(int64_t)a->size };
		if (a->born <= s->peak_seq && a->died > s->peak_seq) {
			o->at_peak[k] += a->size;
			o->blocks_at_peak[k]++;
		}
	}
	for (int k = 0; k < SP_OWNER__N; k++) { /* each owner's own highest level in the window */
		int64_t level = 0;
		if (nc[k])
			sp_sort(c[k], nc[k], sizeof(*c[k]), by_seq);
		for (size_t i = 0; i < nc[k]; i++) {
			level += c[k][i].delta;
			if (level > 0 && (uint64_t)level > o->peak[k])
				o->peak[k] = (uint64_t)level;
		}
		free(c[k]);
	}
}

/* The owner of series k's counts (made if absent). Exits if memory runs out. */
static struct sp_memtl_owned *owned_of(struct sp_memtl_reader *m, size_t k)
{
	struct sp_memtl_series *s = &m->out.s[k];
	if (!s->owned && !(s->owned = calloc(1, sizeof(*s->owned))))
		sp_oom();
	return s->owned;
}

void sp_memtl_owner_born(struct sp_memtl_reader *m, struct live *x, size_t k)
{
	struct sp_memtl_owned *o = owned_of(m, k);
	uint32_t n = 0, i = x->a.stack ? sp_trace_stack_index(m->r, x->a.stack) : 0;
	const uint64_t *pcs = i ? sp_trace_stack(m->r, x->a.stack, &n) : NULL;
	char why[128];

	m->owner_of = sp_xgrow(m->owner_of, &m->owner_cap, 1, i);
	if (!m->owner_of[i]) /* the same stack has the same owner */
		m->owner_of[i] = (uint8_t)(1 + sp_memtl_owner(m->sym, pcs, pcs ? n : 0, why, sizeof(why)));
	x->owner = m->owner_of[i] - 1;
	if (x->owner == SP_OWNER_UNKNOWN && !o->blocks[x->owner]) {
		sp_memtl_owner(m->sym, pcs, pcs ? n : 0, why, sizeof(why));
		snprintf(o->unknown_why, sizeof(o->unknown_why), "%s", why);
	}
	o->blocks[x->owner]++;
	uint64_t *level = &m->thin[k].owner_level[x->owner];
	*level += x->a.size;
	if (*level > o->peak[x->owner])
		o->peak[x->owner] = *level;
}

void sp_memtl_owner_freed(struct sp_memtl_reader *m, const struct live *x, size_t k)
{
	uint64_t *level = &m->thin[k].owner_level[x->owner];
	*level = *level > x->a.size ? *level - x->a.size : 0;
}

void sp_memtl_owner_at_peak(struct sp_memtl_reader *m, const struct live *x, size_t k)
{
	struct sp_memtl_owned *o = owned_of(m, k);
	o->at_peak[x->owner] += x->a.size;
	o->blocks_at_peak[x->owner]++;
}
