/* SPDX-License-Identifier: MIT */
/* pyops.c - [activities] ops and modules: torch's NVTX emission and global module hooks on for a
 * window, off at its end at the first safe point (no op range of the emission open). docs/CONFIG.md. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "pybridge_int.h"

#define MOD_CACHE 4096 /* modules named per window without asking Python (a power of two) */

/* The helpers, compiled into the bridge's private globals: ops_on/ops_off (hooks and emission),
 * mod_name (a module's path from its outermost module), mod_params (a convolution's parameters). */
static const char ops_src[] =
	"_st = {'prof': None, 'hooks': []}\n"
	"_names = {}\n"
	"_keep = []\n"
	"_count = {}\n"
	"def _compiled(mods):\n"
	"    u = mods.get('torch._dynamo.utils')\n"
	"    c = getattr(u, 'counters', None)\n"
	"    f = c.get('frames') if isinstance(c, dict) else None\n"
	"    return bool(f) and sum(f.values()) > 0\n"
	"def ops_on(mods, ops, pre, post):\n"
	"    r = find(mods, 'torch.autograd.profiler', '_enable_profiler')\n"
	"    h = find(mods, 'torch.nn.modules.module', 'register_module_forward_pre_hook')\n"
	"    for x in (r, h):\n"
	"        if x is None or type(x) is str:\n"
	"            return x\n"
	"    if _compiled(mods):\n"
	"        return 'torch.compile ran (module hooks would make its code recompile)'\n"
	"    prof, m, on = r[0], h[0], 2\n"
	"    _st['why'] = None\n"
	"    if ops and getattr(prof, '_is_profiler_enabled', False):\n"
	"        _st['why'], ops = 'a torch profiler of the program is running', False\n"
	"    if ops and 'ProfilerStep' in getattr(getattr(prof, 'KinetoStepTracker', None), '_step_dict', ()):\n"
	"        _st['why'] = 'the program made a torch.profiler.profile (torch allows one profiler a thread)'\n"
	"        ops = False\n"
	"    try:\n"
	"        _st['hooks'].append(m.register_module_forward_pre_hook(pre))\n"
	"        try:\n"
	"            _st['hooks'].append(m.register_module_forward_hook(post, always_call=True))\n"
	"        except TypeError:\n"
	"            _st['hooks'].append(m.register_module_forward_hook(post))\n"
	"        if ops:\n"
	"            cfg = prof.ProfilerConfig(prof.ProfilerState.NVTX, True, False, False, False, False,\n"
	"                                      prof._ExperimentalConfig())\n"
	"            start = getattr(prof, '_run_on_profiler_start', None)\n"
	"            stop = getattr(prof, '_run_on_profiler_stop', None)\n"
	"            if start is not None:\n"
	"                start()\n"
	"            try:\n"
	"                prof._enable_profiler(cfg, set())\n"
	"            except BaseException:\n"
	"                if stop is not None:\n"
	"                    stop()\n"
	"                raise\n"
	"            _st['prof'] = prof\n"
	"            on |= 1\n"
	"    except BaseException:\n"
	"        ops_off()\n"
	"        raise\n"
	"    return on\n"
	"def ops_why():\n"
	"    return _st.get('why')\n"
	"def ops_off():\n"
	"    hooks, prof = _st['hooks'], _st['prof']\n"
	"    _st['hooks'], _st['prof'] = [], None\n"
	"    _names.clear()\n"
	"    del _keep[:]\n"
	"    _count.clear()\n"
	"    for x in hooks:\n"
	"        x.remove()\n"
	"    if prof is not None:\n"
	"        try:\n"
	"            prof._disable_profiler()\n"
	"        finally:\n"
	"            stop = getattr(prof, '_run_on_profiler_stop', None)\n"
	"            if stop is not None:\n"
	"                stop()\n"
	"def _name_all(m, root):\n"
	"    try:\n"
	"        subs = list(m.named_modules())\n"
	"    except Exception:\n"
	"        subs = []\n"
	"    for path, sub in subs:\n"
	"        if id(sub) not in _names:\n"
	"            _names[id(sub)] = root + '.' + path if path else root\n"
	"            _keep.append(sub)\n"
	"def mod_name(m, parent):\n"
	"    n = _names.get(id(m))\n"
	"    if n is not None:\n"
	"        return n\n"
	"    cls = type(m).__name__\n"
	"    if parent is not None:\n"
	"        return parent + '.' + cls\n"
	"    k = _count[cls] = _count.get(cls, 0) + 1\n"
	"    n = cls if k == 1 else '%s#%d' % (cls, k)\n"
	"    _name_all(m, n)\n"
	"    _names[id(m)] = n\n"
	"    _keep.append(m)\n"
	"    return n\n"
	"def mod_kept(m):\n"
	"    return id(m) in _names\n"
	"def _ints(v):\n"
	"    return ','.join(str(int(x)) for x in (v if isinstance(v, (tuple, list)) else (v,)))\n"
	"def mod_params(m):\n"
	"    if type(m).__name__ not in ('Conv1d', 'Conv2d', 'Conv3d'):\n"
	"        return None\n"
	"    p = m.padding\n"
	"    return 'stride=%s padding=%s dilation=%s groups=%d' % (_ints(m.stride),\n"
	"        p if isinstance(p, str) else _ints(p), _ints(m.dilation), int(m.groups))\n";

/* The state (the program's thread that turned it on, with the GIL held, reads and writes it). */
static struct {
	int ready;      /* ops_src is compiled into the helpers */
	int failed;     /* off for good after a Python exception (said) */
	int on;         /* what is on: 1 torch's emission, 2 the module hooks (ops_on's answer) */
	int pending;    /* the window ended with op ranges open: off at the next safe point */
	int unseen;     /* the emission reached no handler of stepprof's: not turned on again (said) */
	unsigned long seen0; /* sp_collector_ops_seen() when the emission went on */
	uint32_t tid;   /* the thread that turned them on */
	char said[160]; /* the last reason given for not turning them on (said once) */
	PyObj *pre, *post; /* the module hooks' callables (kept for the process) */
	struct {
		const void *obj;        /* the module (identity only; the helpers keep it alive) */
		uint32_t name, params;  /* interned */
	} cache[MOD_CACHE];
	unsigned cached; /* entries used */
} po;

static uint32_t tid_now(void)
{
	static __thread uint32_t t;
	if (!t)
		t = (uint32_t)syscall(SYS_gettid);
	return t;
}

/* Operators and modules go off for good: a Python exception while doing what (said once, with it). */
static void failed(const char *what)
{
	char why[300];
	sp_py_error(why, sizeof why);
	po.failed = 1;
	sp_warn("torch operators: %s failed (%s); operators and module paths are not recorded from now on", what, why);
}

/* Helper `name` of the bridge's globals called with up to 4 arguments (NULL-terminated). A new
 * reference, or NULL with an exception pending. */
static PyObj *helper(const char *name, PyObj *a, PyObj *b, PyObj *c, PyObj *d)
{
	PyObj *f = sp_py.dict_get(sp_pyb.helpers, name);
	return f ? sp_py.call(f, a, b, c, d, NULL) : NULL;
}

static PyObj *on_module_pre(PyObj *self, PyObj *const *args, ssize_t nargs);
static PyObj *on_module_post(PyObj *self, PyObj *const *args, ssize_t nargs);
static struct sp_pymethod defs[] = {
	{ "stepprof_module_pre", (void *)on_module_pre, SP_METH_FASTCALL, NULL },
	{ "stepprof_module_post", (void *)on_module_post, SP_METH_FASTCALL, NULL },
};

/* Compiles ops_src into the helpers and makes the hooks' callables. Returns 0, or -1 (failed). */
static int ready(void)
{
	if (po.ready)
		return 0;
	PyObj *code = sp_py.compile(ops_src, "<stepprof-ops>", SP_PY_FILE_INPUT), *r = NULL;
	if (code && (r = sp_py.eval(code, sp_pyb.helpers, sp_pyb.helpers)))
		sp_py.decref(r);
	if (code)
		sp_py.decref(code);
	if (r && (po.pre = sp_py.cfunction(&defs[0], NULL, NULL)) && (po.post = sp_py.cfunction(&defs[1], NULL, NULL)))
		po.ready = 1;
	if (!po.ready)
		failed("setting up its helpers");
	return po.ready ? 0 : -1;
}

/* Says why (once for each reason): operators or modules are not recorded in this window. */
static void say_why(const char *why)
{
	if (why && strncmp(po.said, why, sizeof po.said - 1)) {
		snprintf(po.said, sizeof po.said, "%s", why);
		sp_info("torch operators: not recorded in this window: %s", why);
	}
}

/* Turns on what want asks (SP_OPS_*) on this thread: the emission (SP_OPS_OPS) and the module
 * hooks (always: the hooks find the safe point to turn the emission off). */
static void turn_on(int want)
{
	if (ready() < 0)
		return;
	PyObj *o = sp_py.long_from(want & SP_OPS_OPS ? 1 : 0);
	PyObj *r = o ? helper("ops_on", sp_py.modules(), o, po.pre, po.post) : NULL;
	if (o)
		sp_py.decref(o);
	if (!r) {
		failed("turning on torch's NVTX emission and module hooks");
		return;
	}
	if (!strcmp(sp_py_type_name(r), "str")) {
		say_why(sp_py.utf8(r));
	} else if (r != sp_py.none) {
		po.on = (int)sp_py.long_as(r);
		po.seen0 = sp_collector_ops_seen();
		po.tid = tid_now();
		po.cached = 0;
		memset(po.cache, 0, sizeof po.cache);
		PyObj *why = helper("ops_why", NULL, NULL, NULL, NULL);
		if (why && !strcmp(sp_py_type_name(why), "str"))
			say_why(sp_py.utf8(why));
		if (why)
			sp_py.decref(why);
		else
			sp_py.clear();
	}
	sp_py.decref(r);
}

/* Turns both off (the emission only where no op range begun under it is open here). An emission
 * that brought no op range to stepprof (torch's NVTX was set up before stepprof named itself
 * NVTX's injection) is not turned on again: it would cost the program and record nothing. */
static void turn_off(void)
{
	if ((po.on & 1) && sp_collector_ops_seen() == po.seen0 && !po.unseen) {
		po.unseen = 1;
		sp_warn("torch operators: torch's NVTX ranges did not reach stepprof in a window (its NVTX was "
			"set up before stepprof became NVTX's injection, or another tool took it); operators are "
			"not recorded from now on, module paths still are");
	}
	PyObj *r = helper("ops_off", NULL, NULL, NULL, NULL);
	po.on = 0;
	po.pending = 0;
	if (!r) {
		failed("turning off torch's NVTX emission and module hooks");
		return;
	}
	sp_py.decref(r);
}

void sp_pyops_tick(void)
{
	if (po.failed || !sp_pyb_live() || !sp_pyb.helpers)
		return;
	int want = sp_collector_ops_want() & ~(po.unseen ? SP_OPS_OPS : 0);
	if (want) {
		po.pending = 0;
		if (!po.on)
			turn_on(want);
	} else if (po.on && tid_now() == po.tid) {
		if (sp_collector_ops_open() == 0)
			turn_off();
		else
			po.pending = 1;
	}
}

/* The interned path and parameters of module m (asking the helpers on a miss). Returns 0, or -1
 * (failed). */
static int name_of(PyObj *m, uint32_t *name, uint32_t *params)
{
	unsigned h = (unsigned)(((uintptr_t)m >> 4) * 2654435761u) & (MOD_CACHE - 1);
	for (unsigned i = 0; i < MOD_CACHE && po.cache[h].obj; i++, h = (h + 1) & (MOD_CACHE - 1))
		if (po.cache[h].obj == m) {
			*name = po.cache[h].name;
			*params = po.cache[h].params;
			return 0;
		}
	uint32_t top = sp_collector_module_top();
	PyObj *parent = top ? sp_py.unicode(sp_intern_lookup(top)) : sp_py_none();
	PyObj *n = parent ? helper("mod_name", m, parent, NULL, NULL) : NULL;
	PyObj *p = n ? helper("mod_params", m, NULL, NULL, NULL) : NULL;
	PyObj *kept = p ? helper("mod_kept", m, NULL, NULL, NULL) : NULL;
	const char *ns = n ? sp_py.utf8(n) : NULL, *ps = p && p != sp_py.none ? sp_py.utf8(p) : NULL;
	*name = ns ? sp_intern(ns) : 0;
	*params = ps ? sp_intern(ps) : 0;
	int keep = kept && !strcmp(sp_py_type_name(kept), "bool") && sp_py.long_as(kept) == 1;
	PyObj *refs[] = { parent, n, p, kept };
	for (size_t k = 0; k < 4; k++)
		if (refs[k])
			sp_py.decref(refs[k]);
	if (!ns || !kept) {
		failed("naming a module");
		return -1;
	}
	/* a module of its own is cached while the helpers keep it (its address stays its); a module made
	 * anew at each call is asked about each time. Half full at most: probes stay short. */
	if (keep && po.cached < MOD_CACHE / 2 && !po.cache[h].obj) {
		po.cache[h].obj = m;
		po.cache[h].name = *name;
		po.cache[h].params = *params;
		po.cached++;
	}
	return 0;
}

/* torch's global forward pre hook: hook(module, args), before every module's forward. */
static PyObj *on_module_pre(PyObj *self, PyObj *const *args, ssize_t nargs)
{
	(void)self;
	if (!sp_pyb_live() || po.failed || nargs < 1)
		return sp_py_none();
	if (po.pending && tid_now() == po.tid && !sp_collector_module_depth())
		sp_pyops_tick(); /* a safe point: nothing of torch's is open around the outermost module */
	uint32_t name, params;
	if (po.on && name_of(args[0], &name, &params) == 0)
		sp_collector_module_enter(args[0], name, params);
	return sp_py_none();
}

/* torch's global forward hook: hook(module, args, output), after its forward (always_call: also
 * when it raised). */
static PyObj *on_module_post(PyObj *self, PyObj *const *args, ssize_t nargs)
{
	(void)self;
	if (sp_pyb_live() && nargs >= 1)
		sp_collector_module_exit(args[0]);
	return sp_py_none();
}
