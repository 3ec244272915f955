/* SPDX-License-Identifier: MIT */
/* ops.c - ranges on CPU threads inside windows, as marker events: NVTX ranges of the default domain
 * (torch's operators, the program's ranges) and nn.Module forwards from the bridge. A per-thread stack of
 * open ranges; one is written if it began and ended in the same window. Calls neither Python nor CUPTI. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/base/opmsg.h"
#include "collector/collector.h"
#include "collector/cupti/cupti_api.h"
#include "internal.h"

#define STACK_MAX 96 /* open ranges kept per thread and kind; deeper ones are counted only */
#define NAME_MAX_LEN 255 /* an op or range name longer than this is cut */
#define SHAPES_MAX_LEN 2000 /* an op's sizes longer than this are cut and end "..." */

/* One open range. */
struct range {
	uint64_t t;       /* when it began (this thread's clock, sp_thr_ns) */
	const void *obj;  /* a module: the object (identity only) */
	int64_t seq;      /* the op's sequence number (flags SP_MARKF_SEQ) */
	uint32_t name;    /* interned */
	uint32_t shapes;  /* interned sizes or module parameters, 0 none */
	uint32_t window;  /* id + 1 of the window it began in, 0 none: not written */
	uint8_t flags;    /* SP_MARKF_* */
};

/* A thread's open ranges: NVTX (ops and plain ranges) and modules, each a stack. */
struct stacks {
	struct range nvtx[STACK_MAX], mod[STACK_MAX];
	int nnvtx, nmod;         /* entries used */
	int over_nvtx, over_mod; /* ranges deeper than STACK_MAX, counted only */
	int ops_open;            /* torch op ranges among nvtx (and over_nvtx) */
};

static struct {
	_Atomic int live; /* NVTX ranges and modules are followed in this process */
	_Atomic unsigned long seen; /* torch op ranges begun, any thread */
	int ops, nvtx, modules; /* what the configuration records: ops, plain NVTX ranges, modules */
	char self[4096]; /* this library's path: NVTX's injection ([activities] ops or nvtx) */
	pthread_once_t key_once;
	pthread_key_t key; /* frees a thread's stacks at its exit */
} ops = { .key_once = PTHREAD_ONCE_INIT };

static __thread struct stacks *tls_stacks;
static __thread int tls_making;

static void thread_exit(void *p)
{
	tls_stacks = NULL;
	munmap(p, sizeof(struct stacks));
}

static void make_key(void)
{
	pthread_key_create(&ops.key, thread_exit);
}

/* The calling thread's stacks, mapped on first use (not malloc: NVTX may be called anywhere).
 * Returns NULL if memory ran out (the range is then not followed). */
static struct stacks *mine(void)
{
	if (tls_stacks || tls_making)
		return tls_stacks;
	tls_making = 1;
	struct stacks *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s != MAP_FAILED) {
		pthread_once(&ops.key_once, make_key);
		pthread_setspecific(ops.key, s);
		tls_stacks = s;
	}
	tls_making = 0;
	return tls_stacks;
}

/* The id + 1 of the window open now (RECORD steps), 0 if none. A relaxed read: a boundary crossed
 * meanwhile at most drops the range. */
static uint32_t window_now(void)
{
	struct window *w = __atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE);
	return w && sp_col.active && !sp_col.disabled ? w->id + 1 : 0;
}

/* Interns s[0..n) (cut at cap, marked with "..." when cut). This function can't fail (0 if
 * memory ran out). */
static uint32_t intern_n(const char *s, size_t n, size_t cap)
{
	char buf[SHAPES_MAX_LEN + 4];
	if (cap > SHAPES_MAX_LEN)
		cap = SHAPES_MAX_LEN;
	if (n > cap) {
		memcpy(buf, s, cap);
		memcpy(buf + cap, "...", 4);
	} else {
		memcpy(buf, s, n);
		buf[n] = 0;
	}
	return sp_intern(buf);
}

/* Fills r's name, shapes, seq and flags from an NVTX message. This function can't fail. */
static void parse(const char *msg, struct range *r)
{
	struct sp_opmsg m;
	sp_opmsg_parse(msg, &m);
	r->name = intern_n(msg, m.name_len, NAME_MAX_LEN);
	r->flags = (m.op ? SP_MARKF_OP : 0) | (m.has_seq ? SP_MARKF_SEQ : 0);
	r->seq = m.seq;
	r->shapes = m.sizes ? intern_n(m.sizes, m.sizes_len, SHAPES_MAX_LEN) : 0;
}

int sp_collector_nvtx_push(const char *msg)
{
	struct stacks *s = atomic_load_explicit(&ops.live, memory_order_relaxed) ? mine() : NULL;
	if (!s)
		return 0;
	int depth = s->nnvtx + s->over_nvtx;
	uint32_t win = window_now();
	int torch = msg && strstr(msg, ", op_id = ") != NULL;
	s->ops_open += torch;
	if (torch)
		atomic_fetch_add_explicit(&ops.seen, 1, memory_order_relaxed);
	if (s->nnvtx == STACK_MAX) {
		s->over_nvtx++;
		return depth;
	}
	struct range *r = &s->nvtx[s->nnvtx++];
	memset(r, 0, sizeof *r);
	r->flags = torch ? SP_MARKF_OP : 0;
	if (win && msg && (torch ? ops.ops : ops.nvtx)) {
		parse(msg, r);
		r->window = win;
		r->t = sp_thr_ns(1);
	}
	return depth;
}

/* Writes range r (depth: its position among its kind) if it began in the window still open. */
static void emit(const struct range *r, int depth)
{
	if (!r->window || window_now() != r->window || !r->name)
		return;
	struct sp_event ev = { .kind = SP_EV_MARKER, .device = SP_NO_DEVICE, .tid = sp_coll_tid() };
	ev.start = r->t;
	ev.end = sp_thr_ns(1);
	ev.name = r->name;
	ev.u.marker.depth = depth;
	ev.u.marker.flags = r->flags;
	ev.u.marker.shapes = r->shapes;
	ev.u.marker.seq = r->seq;
	sp_coll_push(&ev);
}

int sp_collector_nvtx_pop(void)
{
	struct stacks *s = atomic_load_explicit(&ops.live, memory_order_relaxed) ? tls_stacks : NULL;
	if (!s)
		return -1;
	if (s->over_nvtx) {
		s->over_nvtx--;
		s->ops_open -= s->ops_open > 0;
		return s->nnvtx + s->over_nvtx;
	}
	if (!s->nnvtx)
		return -1; /* a range pushed before stepprof followed them */
	const struct range *r = &s->nvtx[--s->nnvtx];
	s->ops_open -= (r->flags & SP_MARKF_OP) && s->ops_open > 0;
	emit(r, s->nnvtx);
	return s->nnvtx;
}

void sp_collector_module_enter(const void *obj, uint32_t name, uint32_t params)
{
	struct stacks *s = mine();
	if (!s)
		return;
	if (s->nmod == STACK_MAX) {
		s->over_mod++;
		return;
	}
	struct range *r = &s->mod[s->nmod++];
	memset(r, 0, sizeof *r);
	r->obj = obj;
	r->name = name;
	r->shapes = params;
	r->flags = SP_MARKF_MODULE;
	if (ops.modules && (r->window = window_now()))
		r->t = sp_thr_ns(1);
}

void sp_collector_module_exit(const void *obj)
{
	struct stacks *s = tls_stacks;
	if (!s)
		return;
	if (s->over_mod) {
		s->over_mod--;
		return;
	}
	/* a forward that raised past a hook without always_call left its range open: closed here */
	for (int i = s->nmod - 1; i >= 0; i--)
		if (s->mod[i].obj == obj) {
			s->nmod = i;
			emit(&s->mod[i], i);
			return;
		}
}

int sp_collector_module_depth(void)
{
	return tls_stacks ? tls_stacks->nmod + tls_stacks->over_mod : 0;
}

uint32_t sp_collector_module_top(void)
{
	const struct stacks *s = tls_stacks;
	return s && s->nmod && !s->over_mod ? s->mod[s->nmod - 1].name : 0;
}

unsigned long sp_collector_ops_seen(void)
{
	return atomic_load_explicit(&ops.seen, memory_order_relaxed);
}

int sp_collector_ops_open(void)
{
	return tls_stacks ? tls_stacks->ops_open : 0;
}

/* 1 if NVTX's injection is this library (what torch's emission needs to reach the collector). */
static int injected(void)
{
	static int yes = -1;
	if (yes < 0) {
		const char *v = getenv("NVTX_INJECTION64_PATH");
		yes = v && ops.self[0] && !strcmp(v, ops.self);
		if (!yes && ops.ops)
			sp_info("torch operators are not recorded: NVTX_INJECTION64_PATH is %s, not stepprof",
				v ? v : "unset");
	}
	return yes;
}

int sp_collector_ops_want(void)
{
	if (!(ops.ops || ops.modules) || !sp_pyglue_counts() || !window_now())
		return 0;
	return (ops.ops && injected() ? SP_OPS_OPS : 0) | (ops.modules ? SP_OPS_MODULES : 0);
}

uint32_t sp_collector_torch_memory_window(void)
{
	return sp_col.cfg.torch_memory && sp_pyglue_counts() ? window_now() : 0;
}

const char *sp_collector_trace_path(void)
{
	return sp_out_trace_path();
}

void *sp_collector_nvtx_chain(void)
{
	return sp_cupti.handle ? dlsym(sp_cupti.handle, "InitializeInjectionNvtx2") : NULL;
}

const char *sp_ops_nvtx_library(void)
{
	return atomic_load(&ops.live) && ops.self[0] ? ops.self : NULL;
}

void sp_ops_start(void)
{
	Dl_info info;
	const struct sp_config *c = &sp_col.cfg;
	ops.ops = c->ops;
	ops.nvtx = c->nvtx;
	ops.modules = c->modules;
	if (!c->ops && !c->nvtx && !c->modules)
		return;
	if (!dladdr((void *)sp_ops_start, &info) || !info.dli_fname || !realpath(info.dli_fname, ops.self)) {
		sp_warn("cannot find this library's path: NVTX ranges and torch operators are not recorded");
		ops.self[0] = 0;
	}
	atomic_store(&ops.live, 1);
}
