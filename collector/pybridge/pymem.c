/* SPDX-License-Identifier: MIT */
/* pymem.c - [activities] torch_memory: the caching allocator's history on for each window and its
 * snapshot pickled beside the trace at the window's end; an OOM observer (docs/CONFIG.md). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "pybridge_int.h"

/* The helpers, compiled into the bridge's private globals: mem_on (history on), mem_off (snapshot,
 * summary, history off), mem_watch_oom and mem_oom (the out-of-memory snapshot). The summary's
 * series is worked back from the snapshot's live bytes over its device_traces (docs/OUTPUTS.md). */
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
	"    _tm['n'] = n\n"
	"    return True\n"
	"def _num(v, hi=1 << 56):\n"
	"    return v if type(v) is int and 0 <= v < hi else None\n"
	"def _where(frames):\n"
	"    fs = [f for f in frames[:256] if type(f) is dict] if type(frames) is list else []\n"
	"    for fr in fs:\n"
	"        fn = str(fr.get('filename', '?'))\n"
	"        if '/torch/' not in fn and not fn.startswith('<'):\n"
	"            break\n"
	"    else:\n"
	"        fr = fs[0] if fs else None\n"
	"    if fr is None:\n"
	"        return '?'\n"
	"    w = '%s:%s %s' % (str(fr.get('filename', '?'))[:400], str(fr.get('line', '?'))[:20],\n"
	"                      str(fr.get('name', '?'))[:200])\n"
	"    return ' '.join(w.split())[:300] or '?'\n"
	"def _events(s, t0):\n"
	"    ev, bad, cut, start, tr = [], 0, 0, t0, s.get('device_traces')\n"
	"    tr = [(d, es) for d, es in enumerate(tr[:64]) if type(es) is list and es] if type(tr) is list else []\n"
	"    cap = _MAX_EV // max(1, len(tr))\n"
	"    for d, es in tr:\n"
	"        first = None\n"
	"        for e in es[-cap:]:\n"
	"            a = e.get('action') if type(e) is dict else None\n"
	"            t, z, addr = (None,) * 3\n"
	"            if a:\n"
	"                t, z, addr = _num(e.get('time_us')), _num(e.get('size')), _num(e.get('addr'), 1 << 64)\n"
	"            if t is None or type(a) is not str or a in _LEVEL and z is None or a in _BLOCK and addr is None:\n"
	"                bad += 1\n"
	"                continue\n"
	"            first = t if first is None else first\n"
	"            ev.append((t, d, a, addr, z, e.get('frames')))\n"
	"        if first is not None and first > t0 and (len(es) > cap or len(es) >= _tm.get('n', 0)):\n"
	"            cut, start = max(cut, 2 if len(es) > cap else 1), max(start, first)\n"
	"    ev.sort(key=lambda x: x[0])\n"
	"    return ev, bad, cut, start\n"
	"_MAX_EV = 500000\n"
	"_BLOCK = ('alloc', 'free_requested')\n"
	"_LEVEL = _BLOCK + ('segment_alloc', 'segment_free', 'segment_map', 'segment_unmap')\n"
	"def _delta(i, x, last, ends):\n"
	"    a, z = x[2], x[4]\n"
	"    if a in _BLOCK:\n"
	"        k = (x[1], x[3])\n"
	"        r = ends[k] if a == 'alloc' and last.get(k) == i and k in ends else max(512, (z + 511) // 512 * 512)\n"
	"        return (r if a == 'alloc' else -r), 0\n"
	"    if a in _LEVEL:\n"
	"        return 0, (z if a in ('segment_alloc', 'segment_map') else -z)\n"
	"    return 0, 0\n"
	"def _series(ev, dl, a0, r0, start):\n"
	"    nb, bk, pts, peak, a, r = 250, {}, [], None, a0, r0\n"
	"    span = max(1, (ev[-1][0] if ev else start) - start)\n"
	"    for i, x in enumerate(ev):\n"
	"        if peak is None and x[0] >= start:\n"
	"            peak = (start, a, i - 1)\n"
	"            pts.append((start, i - 1, a, r))\n"
	"        a, r = a + dl[i][0], r + dl[i][1]\n"
	"        if peak is None:\n"
	"            continue\n"
	"        p, k = (x[0], i, a, r), min(nb - 1, (x[0] - start) * nb // span)\n"
	"        b = bk.get(k)\n"
	"        if b is None:\n"
	"            bk[k] = [p, p, p, p]\n"
	"            b = bk[k]\n"
	"        b[0], b[1] = (p if a > b[0][2] else b[0]), (p if a < b[1][2] else b[1])\n"
	"        b[2], b[3] = (p if r > b[2][3] else b[2]), p\n"
	"        if a > peak[1]:\n"
	"            peak = (x[0], a, i)\n"
	"    if peak is None:\n"
	"        peak = (start, a, len(ev) - 1)\n"
	"        pts.append((start, len(ev) - 1, a, r))\n"
	"    for b in bk.values():\n"
	"        pts += b\n"
	"    return peak, sorted(set(pts), key=lambda p: p[1])\n"
	"def _at_peak(ev, dl, pi, nblocks, peak_bytes):\n"
	"    live, g, cache, pre = {}, ({} if pi < 0 else None), {}, 0\n"
	"    for i, x in enumerate(ev):\n"
	"        if x[2] == 'alloc':\n"
	"            live[(x[1], x[3])] = (dl[i][0], x[5])\n"
	"        elif x[2] == 'free_requested' and live.pop((x[1], x[3]), None) is None and g is not None:\n"
	"            pre += 1\n"
	"        if i == pi:\n"
	"            g = {}\n"
	"            for z, fr in live.values():\n"
	"                w = cache.get(id(fr)) or cache.setdefault(id(fr), _where(fr))\n"
	"                v = g.setdefault(w, [0, 0])\n"
	"                v[0], v[1] = v[0] + z, v[1] + 1\n"
	"    pre_b = peak_bytes - sum(v[0] for v in g.values())\n"
	"    if pre_b > 0 or pre:\n"
	"        n = max(0, nblocks - len(live)) + pre\n"
	"        g['(allocated before the window\\'s history: no stack)'] = [pre_b, n]\n"
	"    return sorted(g.items(), key=lambda kv: -kv[1][0])[:10]\n"
	"def _history(s, ends, live, reserved, nblocks, t0):\n"
	"    c = lambda v: min(max(v, 0), 1 << 62)\n"
	"    ev, bad, cut, start = _events(s, t0)\n"
	"    last = {}\n"
	"    for i, x in enumerate(ev):\n"
	"        if x[2] in _BLOCK:\n"
	"            last[(x[1], x[3])] = i\n"
	"    dl = [_delta(i, x, last, ends) for i, x in enumerate(ev)]\n"
	"    a0, r0 = live - sum(d[0] for d in dl), reserved - sum(d[1] for d in dl)\n"
	"    peak, pts = _series(ev, dl, a0, r0, start)\n"
	"    out = ['history_start_us %d' % t0, 'entries %d %d' % (len(ev), bad), 'cut %d' % cut,\n"
	"           'series_start_us %d' % start, 'peak %d %d' % (peak[0], c(peak[1]))]\n"
	"    out += ['at_peak %d %d %s' % (c(v[0]), v[1], w) for w, v in _at_peak(ev, dl, peak[2], nblocks, peak[1])]\n"
	"    return out + ['point %d %d %d' % (p[0], c(p[2]), c(p[3])) for p in pts]\n"
	"def _summary(s, path, t0):\n"
	"    segs, live, reserved, blocks, ends = s.get('segments'), 0, 0, [], {}\n"
	"    segs = segs if type(segs) is list else []\n"
	"    for g in segs:\n"
	"        bl = g.get('blocks', []) if type(g) is dict else []\n"
	"        reserved += _num(g.get('total_size')) or 0 if type(g) is dict else 0\n"
	"        for b in bl if type(bl) is list else []:\n"
	"            if type(b) is dict and b.get('state') == 'active_allocated':\n"
	"                z, addr = _num(b.get('size')) or 0, _num(b.get('address'), 1 << 64)\n"
	"                live += z\n"
	"                blocks.append((z, b))\n"
	"                if addr is not None:\n"
	"                    ends[(_num(g.get('device'), 1 << 16) or 0, addr)] = z\n"
	"    blocks.sort(key=lambda zb: -zb[0])\n"
	"    out = ['stepprof-torch-memory 2', 'allocated %d' % live, 'reserved %d' % reserved,\n"
	"           'segments %d' % len(segs), 'blocks %d' % len(blocks)]\n"
	"    out += ['top %d %s' % (z, _where(b.get('frames'))) for z, b in blocks[:10]]\n"
	"    out += _history(s, ends, live, reserved, len(blocks), _num(t0) or 0)\n"
	"    with open(path, 'x') as f:\n"
	"        f.write('\\n'.join(out) + '\\n')\n"
	"def mem_off(path, spath, t0):\n"
	"    rec, snap, dump = _tm.pop('rec'), _tm.pop('snap'), _tm.pop('dump')\n"
	"    try:\n"
	"        s = snap()\n"
	"        if path is not None:\n"
	"            with open(path, 'xb') as f:\n"
	"                dump(s, f)\n"
	"            _summary(s, spath, t0)\n"
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
	long t0_us;    /* CLOCK_REALTIME in us when its history was turned on (torch's time_us clock) */
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

/* Helper `name` of the bridge's globals called with a, b and c (a NULL ends the arguments).
 * A new reference, or NULL with an exception pending. */
static PyObj *helper(const char *name, PyObj *a, PyObj *b, PyObj *c)
{
	PyObj *f = sp_py.dict_get(sp_pyb.helpers, name);
	return f ? sp_py.call(f, a, b, c, NULL) : NULL;
}

/* CLOCK_REALTIME in microseconds: the clock of torch's trace entries (time_us). */
static long realtime_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long)ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
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
	PyObj *r = fn ? helper("mem_watch_oom", sp_py.modules(), fn, NULL) : NULL;
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
	pm.t0_us = realtime_us();
	PyObj *r = n ? helper("mem_on", sp_py.modules(), n, NULL) : NULL;
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
	PyObj *on_us = sp ? sp_py.long_from(pm.t0_us) : NULL;
	PyObj *r = on_us ? helper("mem_off", p, sp, on_us) : NULL;
	if (p)
		sp_py.decref(p);
	if (sp)
		sp_py.decref(sp);
	if (on_us)
		sp_py.decref(on_us);
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
	PyObj *p = sp_py.unicode(path), *r = p ? helper("mem_oom", sp_py.modules(), p, NULL) : NULL;
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
