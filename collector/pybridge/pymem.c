/* SPDX-License-Identifier: MIT */
/* pymem.c - [activities] torch_memory: the caching allocator's history on for each window and its
 * snapshot pickled beside the trace at the window's end; an OOM observer (docs/CONFIG.md). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "pybridge_int.h"

/* The helpers, compiled into the bridge's private globals: mem_on (history on), mem_off (snapshot,
 * summary, history off), mem_watch_oom and mem_oom (the out-of-memory snapshot). */
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
	"def _where(frames):\n"
	"    for fr in frames:\n"
	"        fn = str(fr.get('filename', '?'))\n"
	"        if '/torch/' not in fn and not fn.startswith('<'):\n"
	"            break\n"
	"    else:\n"
	"        fr = frames[0] if frames else None\n"
	"    if fr is None:\n"
	"        return '?'\n"
	"    w = '%s:%s %s' % (fr.get('filename', '?'), fr.get('line', '?'), fr.get('name', '?'))\n"
	"    return ' '.join(w.split())\n"
	"def _summary(s, path):\n"
	"    segs, live, reserved, blocks = s.get('segments', []), 0, 0, []\n"
	"    for g in segs:\n"
	"        reserved += int(g.get('total_size', 0))\n"
	"        for b in g.get('blocks', []):\n"
	"            if b.get('state') == 'active_allocated':\n"
	"                live += int(b.get('size', 0))\n"
	"                blocks.append(b)\n"
	"    blocks.sort(key=lambda b: -int(b.get('size', 0)))\n"
	"    out = ['stepprof-torch-memory 1', 'allocated %d' % live, 'reserved %d' % reserved,\n"
	"           'segments %d' % len(segs), 'blocks %d' % len(blocks)]\n"
	"    out += ['top %d %s' % (int(b.get('size', 0)), _where(b.get('frames') or [])) for b in blocks[:10]]\n"
	"    with open(path, 'x') as f:\n"
	"        f.write('\\n'.join(out) + '\\n')\n"
	"def mem_off(path, spath):\n"
	"    rec, snap, dump = _tm.pop('rec'), _tm.pop('snap'), _tm.pop('dump')\n"
	"    try:\n"
	"        s = snap()\n"
	"        if path is not None:\n"
	"            with open(path, 'xb') as f:\n"
	"                dump(s, f)\n"
	"            _summary(s, spath)\n"
	"    finally:\n"
	"        rec(enabled=None)\n"
	"    return True\n"
	"def mem_watch_oom(mods, observer):\n"
	"    r = find(mods, 'torch._C', '_cuda_attach_out_of_memory_observer')\n"
	"    if type(r) is not tuple:\n"
	"        return r if type(r) is str else 'torch._C is not imported'\n"
	"    r[2](observer)\n"
	"    return True\n"
	"def mem_oom(mods, path):\n"
	"    s = find(mods, 'torch.cuda.memory', '_snapshot')\n"
	"    p = find(mods, 'pickle', 'dump')\n"
	"    if type(s) is not tuple or type(p) is not tuple:\n"
	"        return 'torch.cuda.memory or pickle is not in sys.modules'\n"
	"    with open(path, 'xb') as f:\n"
	"        p[2](s[2](), f)\n"
	"    return True\n";

/* The state (the program's threads, one at a time under the GIL). */
static struct {
	int ready;     /* mem_src is compiled into the helpers */
	int failed;    /* off for good (said) */
	uint32_t win;  /* id + 1 of the window whose history is on, 0 none */
	int oom_watch; /* 0 not tried, 1 the observer is attached, -1 it cannot be (said) */
	unsigned ooms; /* out-of-memory snapshots taken (at most MAX_OOMS) */
} pm;

#define MAX_OOMS 4 /* out-of-memory snapshots a process (torch may retry a failed allocation) */

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

static PyObj *on_oom(PyObj *self, PyObj *const *args, ssize_t nargs);
static struct sp_pymethod oom_def = { "stepprof_out_of_memory", (void *)on_oom, SP_METH_FASTCALL, NULL };

/* Attaches the out-of-memory observer, once (the trace exists from the first window on). */
static void watch_oom(void)
{
	if (pm.oom_watch)
		return;
	pm.oom_watch = -1;
	PyObj *fn = sp_py.cfunction(&oom_def, NULL, NULL);
	PyObj *r = fn ? helper("mem_watch_oom", sp_py.modules(), fn) : NULL;
	if (fn)
		sp_py.decref(fn);
	if (!r) { /* the window's history is on: only the out-of-memory snapshots go */
		char why[300];
		sp_py_error(why, sizeof why);
		sp_warn("torch memory: attaching an out-of-memory observer to torch's allocator failed (%s); no "
			"snapshot at out-of-memory",
			why);
		return;
	}
	if (!strcmp(sp_py_type_name(r), "str"))
		sp_warn("torch memory: no snapshot at out-of-memory: %s", sp_py.utf8(r) ? sp_py.utf8(r) : "?");
	else
		pm.oom_watch = 1;
	sp_py.decref(r);
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
	watch_oom();
	sp_info("torch memory: allocator history on for window %u (%d entries at most)", win - 1,
		sp_pyb.ask.torch_memory_entries);
}

/* The snapshot's file: the trace's path without ".sptrace", then ".<what><id>.memory_snapshot.pickle"
 * (what "w": window id's, "oom": the id-th out-of-memory's). Returns 0, or -1 (no trace yet, or a
 * path too long). */
static int snapshot_path(const char *what, uint32_t id, char *buf, size_t n)
{
	const char *t = sp_collector_trace_path();
	if (!t)
		return -1;
	size_t len = strlen(t), ext = strlen(".sptrace");
	if (len > ext && !strcmp(t + len - ext, ".sptrace"))
		len -= ext;
	int k = snprintf(buf, n, "%.*s.%s%u.memory_snapshot.pickle", (int)len, t, what, id);
	return k > 0 && (size_t)k < n ? 0 : -1;
}

/* The summary beside a window's snapshot (what `stepprof memory` reads): its path with
 * ".memory_summary.txt" in place of ".memory_snapshot.pickle". Returns 0, or -1 (too long). */
static int summary_path(const char *snap, char *buf, size_t n)
{
	size_t len = strlen(snap), ext = strlen(".memory_snapshot.pickle");
	int k = snprintf(buf, n, "%.*s.memory_summary.txt", (int)(len > ext ? len - ext : len), snap);
	return k > 0 && (size_t)k < n ? 0 : -1;
}

/* Takes the snapshot of the window whose history is on, writes it, turns the history off. */
static void snapshot_off(void)
{
	char path[4200];
	uint32_t id = pm.win - 1;
	char spath[4200];
	int have = snapshot_path("w", id, path, sizeof path) == 0 &&
		   summary_path(path, spath, sizeof spath) == 0;
	uint64_t t0 = sp_now_ns();
	PyObj *p = have ? sp_py.unicode(path) : sp_py_none();
	PyObj *sp = p ? (have ? sp_py.unicode(spath) : sp_py_none()) : NULL;
	PyObj *r = sp ? helper("mem_off", p, sp) : NULL;
	if (p)
		sp_py.decref(p);
	if (sp)
		sp_py.decref(sp);
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

/* The allocator's out-of-memory observer: (device, bytes asked, device allocated, device free),
 * on the thread whose allocation failed, before torch raises OutOfMemoryError: a snapshot beside
 * the trace, said on stderr with its path. */
static PyObj *on_oom(PyObj *self, PyObj *const *args, ssize_t nargs)
{
	(void)self;
	if (!sp_pyb_live() || pm.failed || pm.ooms >= MAX_OOMS)
		return sp_py_none();
	char path[4200], what[4300];
	long dev = -1, asked = -1;
	if (nargs >= 2 && !strcmp(sp_py_type_name(args[0]), "int") && !strcmp(sp_py_type_name(args[1]), "int")) {
		dev = sp_py.long_as(args[0]);
		asked = sp_py.long_as(args[1]);
		if (sp_py.occurred())
			sp_py.clear();
	}
	if (snapshot_path("oom", ++pm.ooms, path, sizeof path) < 0) {
		sp_warn_once("torch memory: out of memory on device %ld: no snapshot (no trace file)", dev);
		return sp_py_none();
	}
	PyObj *p = sp_py.unicode(path), *r = p ? helper("mem_oom", sp_py.modules(), p) : NULL;
	if (p)
		sp_py.decref(p);
	snprintf(what, sizeof what, "writing an out-of-memory snapshot to %s", path);
	if (!r) {
		char why[300];
		sp_py_error(why, sizeof why);
		pm.ooms = MAX_OOMS;
		sp_warn("torch memory: %s failed (%s); no more out-of-memory snapshots in this process", what, why);
		return sp_py_none();
	}
	if (!strcmp(sp_py_type_name(r), "str"))
		sp_warn("torch memory: out of memory on device %ld: no snapshot: %s", dev, sp_py.utf8(r) ? sp_py.utf8(r) : "?");
	else
		sp_warn("torch memory: out of memory on device %ld (%ld bytes asked): PyTorch memory snapshot %s (%s)%s",
			dev, asked, path,
			pm.win ? "with the window's allocation history" : "outside windows: blocks only, no history",
			pm.ooms == MAX_OOMS ? "; no more out-of-memory snapshots in this process" : "");
	sp_py.decref(r);
	return sp_py_none();
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
