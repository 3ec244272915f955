/* SPDX-License-Identifier: MIT */
/* pymem.c - PyTorch's own memory view inside windows ([activities] torch_memory), with no change
 * to the program: at a window's first step the bridge turns on the caching allocator's history
 * (torch.cuda.memory._record_memory_history: every event, Python stacks, a bounded number of
 * entries), and at the window's end it takes torch.cuda.memory._snapshot(), pickles it beside the
 * trace as <trace stem>.w<window>.memory_snapshot.pickle (what pytorch.org/memory_viz loads) and
 * turns the history off. On the program's thread with the GIL held, after the bridge's events.
 * Reaches torch and pickle through sys.modules only; a Python exception turns it off for good
 * (said once), the steps go on. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "pybridge_int.h"

/* The helpers (compiled into the bridge's private globals, beside find): mem_on(mods, n) finds
 * the history's switch, the snapshot and pickle.dump, turns the history on with n entries and
 * returns True, or why it cannot (a str). mem_off(path) snapshots into a new file at path (never
 * over an existing one) and turns the history off whatever happened. */
static const char mem_src[] =
	"_tm = {}\n"
	"def mem_on(mods, n):\n"
	"    got = []\n"
	"    for mod, name in (('torch.cuda.memory', '_record_memory_history'),\n"
	"                      ('torch.cuda.memory', '_snapshot'), ('pickle', 'dump')):\n"
	"        r = find(mods, mod, name)\n"
	"        if type(r) is not tuple:\n"
	"            return r if type(r) is str else '%s is not imported' % mod\n"
	"        got.append(r[2])\n"
	"    got[0](enabled='all', context='all', stacks='python', max_entries=n)\n"
	"    _tm['rec'], _tm['snap'], _tm['dump'] = got\n"
	"    return True\n"
	"def mem_off(path):\n"
	"    rec, snap, dump = _tm.pop('rec'), _tm.pop('snap'), _tm.pop('dump')\n"
	"    try:\n"
	"        s = snap()\n"
	"        if path is not None:\n"
	"            with open(path, 'xb') as f:\n"
	"                dump(s, f)\n"
	"    finally:\n"
	"        rec(enabled=None)\n"
	"    return True\n";

/* The state (the program's threads, one at a time under the GIL). */
static struct {
	int ready;     /* mem_src is compiled into the helpers */
	int failed;    /* off for good (said) */
	uint32_t win;  /* id + 1 of the window whose history is on, 0 none */
} pm;

/* Off for good: doing what failed, why (NULL: the pending Python exception, cleared). */
static void failed(const char *what, const char *why)
{
	char buf[300];
	if (!why) {
		sp_py_error(buf, sizeof buf);
		why = buf;
	}
	pm.failed = 1;
	pm.win = 0;
	sp_warn("torch memory: %s failed (%s); PyTorch memory snapshots are not taken from now on", what, why);
}

/* Helper `name` of the bridge's globals called with a and b (either may be NULL: fewer
 * arguments). A new reference, or NULL with an exception pending. */
static PyObj *helper(const char *name, PyObj *a, PyObj *b)
{
	PyObj *f = sp_py.dict_get(sp_pyb.helpers, name);
	return f ? sp_py.call(f, a, b, NULL) : NULL;
}

/* Compiles mem_src into the helpers. Returns 0, or -1 (failed, said). */
static int ready(void)
{
	if (pm.ready)
		return 0;
	PyObj *code = sp_py.compile(mem_src, "<stepprof-mem>", SP_PY_FILE_INPUT), *r = NULL;
	if (code && (r = sp_py.eval(code, sp_pyb.helpers, sp_pyb.helpers)))
		sp_py.decref(r);
	if (code)
		sp_py.decref(code);
	pm.ready = r != NULL;
	if (!pm.ready)
		failed("setting up its helpers", NULL);
	return pm.ready ? 0 : -1;
}

/* Turns the history on for window win (id + 1). */
static void turn_on(uint32_t win)
{
	if (ready() < 0)
		return;
	PyObj *n = sp_py.long_from(sp_pyb.ask.torch_memory_entries);
	PyObj *r = n ? helper("mem_on", sp_py.modules(), n) : NULL;
	if (n)
		sp_py.decref(n);
	if (!r) {
		failed("turning on torch's allocator history", NULL);
		return;
	}
	if (!strcmp(sp_py_type_name(r), "str")) {
		char why[200];
		snprintf(why, sizeof why, "%s", sp_py.utf8(r) ? sp_py.utf8(r) : "?");
		sp_py.decref(r);
		failed("finding torch.cuda.memory and pickle in sys.modules", why);
		return;
	}
	sp_py.decref(r);
	pm.win = win;
	sp_info("torch memory: allocator history on for window %u (%d entries at most)", win - 1,
		sp_pyb.ask.torch_memory_entries);
}

/* The snapshot's file for window id: the trace's path without ".sptrace", then
 * ".w<id>.memory_snapshot.pickle". Returns 0, or -1 (no trace yet, or a path too long). */
static int snapshot_path(uint32_t id, char *buf, size_t n)
{
	const char *t = sp_collector_trace_path();
	if (!t)
		return -1;
	size_t len = strlen(t), ext = strlen(".sptrace");
	if (len > ext && !strcmp(t + len - ext, ".sptrace"))
		len -= ext;
	int k = snprintf(buf, n, "%.*s.w%u.memory_snapshot.pickle", (int)len, t, id);
	return k > 0 && (size_t)k < n ? 0 : -1;
}

/* Takes the snapshot of the window whose history is on, writes it, turns the history off. */
static void snapshot_off(void)
{
	char path[4200];
	uint32_t id = pm.win - 1;
	int have = snapshot_path(id, path, sizeof path) == 0;
	uint64_t t0 = sp_now_ns();
	PyObj *p = have ? sp_py.unicode(path) : sp_py_none();
	PyObj *r = p ? helper("mem_off", p, NULL) : NULL;
	if (p)
		sp_py.decref(p);
	pm.win = 0;
	if (!r) {
		char what[4300];
		snprintf(what, sizeof what, "writing window %u's snapshot to %s", id, have ? path : "(no path)");
		failed(what, NULL);
		return;
	}
	sp_py.decref(r);
	if (have)
		sp_info("PyTorch memory snapshot of window %u: %s (taken, written and the history off in %.1f ms)",
			id, path, (double)(sp_now_ns() - t0) / 1e6);
	else
		failed("naming window's snapshot file", "no trace file (yet), or its path is too long");
}

void sp_pymem_tick(void)
{
	if (!sp_pyb.ask.torch_memory || pm.failed || !sp_pyb_live() || !sp_pyb.helpers)
		return;
	uint32_t win = sp_collector_torch_memory_window();
	if (pm.win && pm.win != win)
		snapshot_off();
	if (win && !pm.win && !pm.failed)
		turn_on(win);
}
