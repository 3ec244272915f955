/* SPDX-License-Identifier: MIT */
/* pywatch.c - what the bridge installs in the program's Python (helpers compiled into private
 * globals, reading sys.modules only) and the C callables Python calls, which never raise. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "collector/base/log.h"
#include "collector/collector.h"
#include "pybridge_int.h"

/* The helpers: find (a finished module's object, through module and class dicts only),
 * hook_optimizer, made (an optimizer made before the watch), capturing, at_exit, monitor (a free
 * sys.monitoring tool id), code_of, wrap, watch (tool < 0: a wrapper; -2: it notes after the call). */
static const char helper_src[] =
	"_missing = object()\n"
	"_Module = type(__builtins__)\n"
	"_Function = type(lambda: None)\n"
	"_Code = type((lambda: None).__code__)\n"
	"_module_dict = _Module.__dict__['__dict__']\n"
	"_type_dict = type.__dict__['__dict__']\n"
	"_type_mro = type.__dict__['__mro__']\n"
	"_plain_getattribute = _Module.__dict__['__getattribute__']\n"
	"_methods = (staticmethod, classmethod)\n"
	"_assigned = ('__module__', '__name__', '__qualname__', '__doc__', '__annotations__', '__type_params__')\n"
	"def _lookup(t, name):\n"
	"    for k in _type_mro.__get__(t):\n"
	"        d = _type_dict.__get__(k)\n"
	"        if name in d:\n"
	"            return d[name]\n"
	"    return _missing\n"
	"def _dict_of(m):\n"
	"    if not issubclass(type(m), _Module):\n"
	"        return None\n"
	"    d = _module_dict.__get__(m)\n"
	"    return d if type(d) is dict else None\n"
	"def _importing(d):\n"
	"    spec = d.get('__spec__')\n"
	"    if spec is None:\n"
	"        return False\n"
	"    try:\n"
	"        return object.__getattribute__(spec, '_initializing') is True\n"
	"    except AttributeError:\n"
	"        return False\n"
	"def _lazy(d):\n"
	"    try:\n"
	"        st = object.__getattribute__(d.get('__spec__'), 'loader_state')\n"
	"    except AttributeError:\n"
	"        return False\n"
	"    return type(st) is dict and '__class__' in st\n"
	"def _static(obj, name):\n"
	"    if issubclass(type(obj), type):\n"
	"        return _lookup(obj, name)\n"
	"    d = _dict_of(obj)\n"
	"    return _missing if d is None else d.get(name, _missing)\n"
	"def find(mods, modname, qualname):\n"
	"    parts = modname.split('.')\n"
	"    for i in range(1, len(parts)):\n"
	"        d = _dict_of(mods.get('.'.join(parts[:i])))\n"
	"        if d is not None and _importing(d):\n"
	"            return None\n"
	"    m = mods.get(modname)\n"
	"    d = _dict_of(m)\n"
	"    if d is None or _importing(d) or _lookup(type(m), '__getattribute__') is not _plain_getattribute:\n"
	"        return None\n"
	"    names = qualname.split('.')\n"
	"    parent, obj = m, d.get(names[0], _missing)\n"
	"    for k, n in enumerate(names[1:]):\n"
	"        if obj is _missing:\n"
	"            break\n"
	"        if not issubclass(type(obj), (type, _Module)):\n"
	"            return '%s:%s is a %s, not a module or class' % (modname, '.'.join(names[:k + 1]), type(obj).__name__)\n"
	"        parent, obj = obj, _static(obj, n)\n"
	"    if obj is not _missing:\n"
	"        return parent, names[-1], obj\n"
	"    if d.get('__spec__') is None or modname == '__main__' or _lazy(d):\n"
	"        return None\n"
	"    return '%s has no %s' % (modname, qualname)\n"
	"def hook_optimizer(mods, hook):\n"
	"    r = find(mods, 'torch.optim.optimizer', 'register_optimizer_step_post_hook')\n"
	"    if r is None or type(r) is str:\n"
	"        return r\n"
	"    return r[2](hook)\n"
	"_subclasses = type.__dict__['__subclasses__']\n"
	"def made(mods):\n"
	"    r = find(mods, 'torch.optim.optimizer', 'Optimizer')\n"
	"    if type(r) is not tuple or not issubclass(type(r[2]), type):\n"
	"        return False\n"
	"    seen, todo = set(), [r[2]]\n"
	"    while todo and len(seen) < 4096:\n"
	"        k = todo.pop()\n"
	"        if id(k) in seen:\n"
	"            continue\n"
	"        seen.add(id(k))\n"
	"        f = _type_dict.__get__(k).get('step')\n"
	"        if type(f) is _Function and f.__dict__.get('hooked') is True:\n"
	"            return True\n"
	"        todo.extend(_subclasses(k))\n"
	"    return False\n"
	"def capturing(mods):\n"
	"    i = find(mods, 'torch.cuda', 'is_initialized')\n"
	"    c = find(mods, 'torch.cuda', 'is_current_stream_capturing')\n"
	"    if type(i) is not tuple or type(c) is not tuple:\n"
	"        return None\n"
	"    i, c = i[2], c[2]\n"
	"    return lambda: c() if i() else False\n"
	"def at_exit(mods, fn):\n"
	"    r = find(mods, 'atexit', 'register')\n"
	"    if r is None or type(r) is str:\n"
	"        return r\n"
	"    r[2](fn)\n"
	"    return True\n"
	"_mon = None\n"
	"def monitor(mods, callback):\n"
	"    global _mon\n"
	"    mon = _dict_of(mods.get('sys')).get('monitoring')\n"
	"    if mon is None:\n"
	"        return -1\n"
	"    for tool in (4, 3):\n"
	"        if mon.get_tool(tool) is None:\n"
	"            mon.use_tool_id(tool, 'stepprof')\n"
	"            mon.register_callback(tool, mon.events.PY_START, callback)\n"
	"            _mon = mon\n"
	"            return tool\n"
	"    return -1\n"
	"def _function(raw):\n"
	"    return raw.__func__ if type(raw) in _methods else raw\n"
	"def code_of(fn):\n"
	"    for _ in range(16):\n"
	"        if type(fn) is not _Function:\n"
	"            return None\n"
	"        w = fn.__dict__.get('__wrapped__', _missing)\n"
	"        if w is _missing:\n"
	"            return fn.__code__\n"
	"        fn = _function(w)\n"
	"    return None\n"
	"def wrap(parent, name, raw, note, after):\n"
	"    fn = _function(raw)\n"
	"    if type(fn) is not _Function:\n"
	"        return 'not a Python function but %s' % type(raw).__name__\n"
	"    def wrapper(*args, **kwargs):\n"
	"        if after:\n"
	"            r = fn(*args, **kwargs)\n"
	"            note(args[0] if args else None)\n"
	"            return r\n"
	"        note(args[0] if args else None)\n"
	"        return fn(*args, **kwargs)\n"
	"    for a in _assigned:\n"
	"        v = getattr(fn, a, _missing)\n"
	"        if v is not _missing:\n"
	"            setattr(wrapper, a, v)\n"
	"    wrapper.__dict__.update(fn.__dict__)\n"
	"    wrapper.__wrapped__ = fn\n"
	"    setattr(parent, name, wrapper if fn is raw else type(raw)(wrapper))\n"
	"    return wrapper\n"
	"def watch(r, modname, qualname, note, tool):\n"
	"    if tool < 0:\n"
	"        return wrap(r[0], r[1], r[2], note, tool == -2)\n"
	"    c = code_of(_function(r[2]))\n"
	"    if c is None:\n"
	"        return '%s:%s is not a Python function but %s' % (modname, qualname, type(r[2]).__name__)\n"
	"    _mon.set_local_events(tool, c, _mon.get_local_events(tool, c) | _mon.events.PY_START)\n"
	"    return c\n";

/* ---- the callables ---- */

static PyObj *helper(const char *name, PyObj *a, PyObj *b, PyObj *c, PyObj *d, PyObj *e);

/* torch.cuda.is_current_stream_capturing, asked only once torch.cuda is initialised (a CPU program's
 * CUDA is never started by it); off after an exception. */
static struct {
	PyObj *fn;
	int off;
} capture_check;

/* 1 if the current CUDA stream captures a graph (asked before the first window only). */
static int capturing(void)
{
	if (capture_check.off || !sp_collector_py_check_capture())
		return 0;
	if (!capture_check.fn) {
		PyObj *f = helper("capturing", sp_py.modules(), NULL, NULL, NULL, NULL);
		if (f && f != sp_py.none)
			capture_check.fn = f; /* kept for the process */
		else if (f)
			sp_py.decref(f); /* torch.cuda not imported yet: asked again at the next step */
		else
			capture_check.off = 1;
	}
	PyObj *r = capture_check.fn ? sp_py.call(capture_check.fn, NULL) : NULL;
	int yes = r && !strcmp(sp_py_type_name(r), "bool") && sp_py.long_as(r) == 1;
	if (r)
		sp_py.decref(r);
	else if (capture_check.fn)
		capture_check.off = 1;
	if (!r)
		sp_py.clear();
	if (capture_check.off)
		sp_info("Python bridge: torch.cuda.is_current_stream_capturing() raised: optimizer steps captured into "
			"a CUDA graph are not looked for from now on");
	return yes;
}

/* torch's global optimizer post hook: hook(optimizer, args, kwargs), after each step(). Takes
 * any call (keywords too) so that no call of it can raise in the program. */
static PyObj *on_optim(PyObj *self, PyObj *const *args, ssize_t nargs, PyObj *kwnames)
{
	(void)self, (void)kwnames;
	if (!sp_pyb_live())
		return sp_py_none();
	if (nargs < 1)
		sp_pyb_off("the optimizer post hook", "torch called it without the optimizer");
	else
		sp_collector_py_event(SP_PY_OPTIM, args[0], sp_py_type_name(args[0]), capturing());
	sp_pyops_tick();
	sp_pymem_tick();
	return sp_py_none();
}

/* An event of watch i (the scaler watch, python marker i - SP_PYW_CALL, an optimizer made); obj: the
 * scaler, the optimizer (wrappers only) or NULL. */
static void watch_event(long i, PyObj *obj)
{
	if (i == SP_PYW_MADE)
		sp_collector_py_event(SP_PY_MADE, obj, obj ? sp_py_type_name(obj) : NULL, 0);
	else if (i == SP_PYW_SCALER)
		sp_collector_py_event(SP_PY_SCALER, obj, obj ? sp_py_type_name(obj) : "GradScaler", 0);
	else if (i >= SP_PYW_CALL && i < SP_PYW_CALL + SP_MAX_PHASES)
		sp_collector_py_event(SP_PY_CALL, NULL, NULL, (int)(i - SP_PYW_CALL));
	sp_pyops_tick();
	sp_pymem_tick();
}

/* sys.monitoring's PY_START callback (3.12+): (code, instruction offset), set on the python
 * markers' code objects only. */
static PyObj *on_start(PyObj *self, PyObj *const *args, ssize_t nargs)
{
	(void)self;
	if (!sp_pyb_live() || nargs < 1)
		return sp_py_none();
	for (long i = SP_PYW_CALL; i < SP_PYW_N; i++)
		if (sp_pyb.code[i] && sp_pyb.code[i] == args[0]) {
			watch_event(i, NULL);
			break;
		}
	return sp_py_none();
}

/* A wrapper's note (the scaler; python markers on 3.10/3.11): self is the watch's index, arg the
 * call's first argument. */
static PyObj *on_note(PyObj *self, PyObj *arg)
{
	if (sp_pyb_live())
		watch_event(sp_py.long_as(self), arg == sp_py.none ? NULL : arg);
	return sp_py_none();
}

/* atexit: the interpreter begins to finalise: no poll starts from here (one that waits for the
 * GIL meanwhile lets it go at once). Not waited for: a poll holds no lock the program could need,
 * and one that CPython ends during finalisation ends inside CPython's own code (pybridge.c). */
static PyObj *on_exit_(PyObj *self, PyObj *unused)
{
	(void)self, (void)unused;
	atomic_store(&sp_pyb.stopping, 1);
	return sp_py_none();
}

static struct sp_pymethod defs[] = {
	{ "stepprof_optimizer_step", (void *)on_optim, SP_METH_FASTCALL | SP_METH_KEYWORDS, NULL },
	{ "stepprof_py_start", (void *)on_start, SP_METH_FASTCALL, NULL },
	{ "stepprof_note", (void *)on_note, SP_METH_O, NULL },
	{ "stepprof_exit", (void *)on_exit_, SP_METH_NOARGS, NULL },
};

/* ---- installing ---- */

/* The bridge goes off: a Python exception while doing what (said with the exception). */
static void failed(const char *what)
{
	char why[300];
	sp_py_error(why, sizeof why);
	sp_pyb_off(what, why);
}

/* Compiles and runs the helpers in a private dict. Returns 0, or -1 (off, said). */
static int make_helpers(void)
{
	PyObj *g = sp_py.dict_new(), *code = NULL, *r = NULL;
	PyObj *bi = sp_py.dict_get(sp_py.modules(), "builtins");
	if (g && bi && sp_py.dict_set(g, "__builtins__", bi) == 0 &&
	    (code = sp_py.compile(helper_src, "<stepprof>", SP_PY_FILE_INPUT)) && (r = sp_py.eval(code, g, g))) {
		sp_py.decref(r);
		sp_py.decref(code);
		sp_pyb.helpers = g;
		sp_pyb.tool = -2;
		return 0;
	}
	if (code)
		sp_py.decref(code);
	if (g)
		sp_py.decref(g);
	if (sp_py.occurred())
		failed("setting up its helpers");
	else
		sp_pyb_off("setting up its helpers", "no builtins module");
	return -1;
}

/* Helper `name` called with args (a NULL-terminated list of at most 5). Returns a new reference,
 * or NULL with an exception pending. */
static PyObj *helper(const char *name, PyObj *a, PyObj *b, PyObj *c, PyObj *d, PyObj *e)
{
	PyObj *f = sp_py.dict_get(sp_pyb.helpers, name);
	return f ? sp_py.call(f, a, b, c, d, e, NULL) : NULL;
}

/* 1 if o is a str (a helper's reason why a watch can never be installed). */
static int is_str(PyObj *o)
{
	return !strcmp(sp_py_type_name(o), "str");
}

/* A new callable for defs[k], its self = self (a new reference taken over; NULL for none). */
static PyObj *callable(int k, PyObj *self)
{
	PyObj *f = sp_py.cfunction(&defs[k], self, NULL);
	if (self)
		sp_py.decref(self);
	return f;
}

/* Registers the atexit callback once the atexit module is there (torch's logging imports it). */
static void hook_exit(void)
{
	PyObj *fn = callable(3, NULL), *r = fn ? helper("at_exit", sp_py.modules(), fn, NULL, NULL, NULL) : NULL;
	if (!r) {
		failed("registering its atexit callback");
		sp_pyb.exit_hooked = 1;
	} else {
		sp_pyb.exit_hooked = r != sp_py.none;
		sp_py.decref(r);
	}
	if (fn)
		sp_py.decref(fn);
}

/* Installs torch's global optimizer post hook once torch.optim.optimizer is imported. */
static void hook_optimizer(void)
{
	PyObj *fn = callable(0, NULL), *r = fn ? helper("hook_optimizer", sp_py.modules(), fn, NULL, NULL, NULL) : NULL;
	if (fn)
		sp_py.decref(fn);
	if (!r) {
		failed("registering torch's optimizer post hook");
		return;
	}
	if (r == sp_py.none) {
		sp_py.decref(r);
		return;
	}
	if (is_str(r)) {
		sp_warn("Python bridge: %s (torch older than 2.0?): no optimizer steps", sp_py.utf8(r));
		sp_py.decref(r);
		sp_pyb.state[SP_PYW_OPTIM] = SP_PYW_FAILED;
		return;
	}
	sp_pyb.hook_handle = r;
	sp_pyb.state[SP_PYW_OPTIM] = SP_PYW_INSTALLED;
	sp_info("Python bridge: torch's global optimizer post hook is in");
	sp_collector_py_installed(SP_PY_OPTIM, 0);
}

/* The sys.monitoring tool id (3.12+; taken once), or -1: wrappers. Returns -3 after an exception
 * (off, said). */
static int tool_id(void)
{
	if (sp_pyb.tool != -2)
		return sp_pyb.tool;
	sp_pyb.tool = -1;
	if (sp_py.minor < 12)
		return -1;
	PyObj *fn = callable(1, NULL), *r = fn ? helper("monitor", sp_py.modules(), fn, NULL, NULL, NULL) : NULL;
	if (fn)
		sp_py.decref(fn);
	if (!r) {
		failed("taking a sys.monitoring tool id");
		return -3;
	}
	sp_pyb.tool = (int)sp_py.long_as(r);
	sp_py.decref(r);
	if (sp_pyb.tool < 0)
		sp_info("Python bridge: sys.monitoring tool ids 3 and 4 are taken: watched functions get a wrapper");
	else
		sp_info("Python bridge: sys.monitoring tool id %d (PY_START on the watched functions only)",
			sp_pyb.tool);
	return sp_pyb.tool;
}

/* Watch i on what find returned: a wrapper, or PY_START under the bridge's tool id (*tool: which).
 * Returns a new reference (the wrapper, the code object, or why not), or NULL (exception pending). */
static PyObj *install_watch(int i, PyObj *f, PyObj *m, PyObj *q, int *tool)
{
	/* the default's watches take no tool id (the program's own use_tool_id could raise); -2: a wrapper
	 * that notes after the call (an optimizer made is one whose __init__ returned) */
	*tool = i == SP_PYW_SCALER ? -1 : i == SP_PYW_MADE ? -2 : tool_id();
	if (*tool == -3)
		return NULL;
	PyObj *note = callable(2, sp_py.long_from(i)), *t = note ? sp_py.long_from(*tool) : NULL;
	PyObj *r = t ? helper("watch", f, m, q, note, t) : NULL;
	if (note)
		sp_py.decref(note);
	if (t)
		sp_py.decref(t);
	return r;
}

/* Optimizer.__init__ is watched from now on: one made before (torch marks the class's step() as
 * `hooked` at its first optimizer) counts once. An exception turns the bridge off. */
static void made_before(void)
{
	PyObj *r = helper("made", sp_py.modules(), NULL, NULL, NULL, NULL);
	if (!r) {
		failed("looking for optimizers made before its watch");
		return;
	}
	if (!strcmp(sp_py_type_name(r), "bool") && sp_py.long_as(r) == 1)
		sp_collector_py_event(SP_PY_MADE, NULL, NULL, 0);
	sp_py.decref(r);
}

/* Watch i (the scaler, python marker i - SP_PYW_CALL, Optimizer.__init__) on modname:qualname, once that
 * is there. */
static void watch(int i, const char *modname, const char *qualname)
{
	int tool = -1;
	PyObj *m = sp_py.unicode(modname), *q = m ? sp_py.unicode(qualname) : NULL;
	PyObj *f = q ? helper("find", sp_py.modules(), m, q, NULL, NULL) : NULL, *r = NULL;
	if (f && f != sp_py.none && !is_str(f))
		r = install_watch(i, f, m, q, &tool);
	else if (f) {
		r = f;
		f = NULL;
	}
	PyObj *refs[] = { m, q, f };
	for (size_t k = 0; k < sizeof refs / sizeof *refs; k++)
		if (refs[k])
			sp_py.decref(refs[k]);
	char what[320];
	snprintf(what, sizeof what, "watching %s:%s", modname, qualname);
	if (!r) {
		if (!atomic_load(&sp_pyb.off))
			failed(what);
		return;
	}
	if (r == sp_py.none) {
		sp_py.decref(r);
		return;
	}
	if (is_str(r)) {
		if (i >= SP_PYW_CALL)
			sp_warn("python marker '%s:%s': %s: it finds no steps", modname, qualname, sp_py.utf8(r));
		else
			sp_info("Python bridge: %s: %s", what, sp_py.utf8(r));
		sp_py.decref(r);
		sp_pyb.state[i] = SP_PYW_FAILED;
		return;
	}
	sp_pyb.code[i] = tool >= 0 ? r : NULL; /* kept: PY_START names it; a wrapper is kept by its class */
	if (tool < 0)
		sp_py.decref(r);
	sp_pyb.state[i] = SP_PYW_INSTALLED;
	sp_info("Python bridge: %s (%s)", what, tool >= 0 ? "sys.monitoring PY_START" : "a wrapper");
	if (i == SP_PYW_MADE)
		made_before();
	else
		sp_collector_py_installed(i == SP_PYW_SCALER ? SP_PY_SCALER : SP_PY_CALL, i - SP_PYW_CALL);
}

void sp_pyw_poll(void)
{
	if (!sp_pyb.helpers && make_helpers() < 0)
		return;
	if (!sp_pyb.exit_hooked)
		hook_exit();
	if (sp_pyb.ask.optimizer && sp_pyb.state[SP_PYW_OPTIM] == SP_PYW_WAITING && !atomic_load(&sp_pyb.off))
		hook_optimizer();
	if (sp_pyb.ask.optimizer && sp_pyb.state[SP_PYW_SCALER] == SP_PYW_WAITING && !atomic_load(&sp_pyb.off))
		watch(SP_PYW_SCALER, "torch.amp.grad_scaler", "GradScaler.update");
	/* kind = auto: a program that made an optimizer will train (decide/regime.c) */
	if (sp_pyb.ask.made && sp_pyb.state[SP_PYW_MADE] == SP_PYW_WAITING && !atomic_load(&sp_pyb.off))
		watch(SP_PYW_MADE, "torch.optim.optimizer", "Optimizer.__init__");
	for (int i = 0; i < sp_pyb.ask.ncalls && !atomic_load(&sp_pyb.off); i++) {
		if (sp_pyb.state[SP_PYW_CALL + i] != SP_PYW_WAITING)
			continue;
		const char *p = sp_pyb.ask.calls[i], *colon = strchr(p, ':');
		char mod[256];
		snprintf(mod, sizeof mod, "%.*s", colon ? (int)(colon - p) : 0, p);
		if (colon)
			watch(SP_PYW_CALL + i, mod, colon + 1);
		else
			sp_pyb.state[SP_PYW_CALL + i] = SP_PYW_FAILED; /* the configuration checks it */
	}
}
