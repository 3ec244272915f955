#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# torch_memory.sh [DIST] - [activities] torch_memory (issue 40) on the GPU machine, from the repo root
# after `make dist` (DIST: dist/stepprof). About 70 s on one H200, 90 s at most (LIMIT). Runs
# tests/gpu/programs/gradscaler_resnet.py (--iters 36 --eval-every 1000) unmodified, through
# torch_memory_wrap.py (a global optimizer post hook that prints torch.cuda.memory_allocated() after
# every step: test-only), with `[marker] kind = optimizer` and the schedule wait 8, warmup 1, active 5,
# repeat 2 (windows 0 and 1), twice: torch_memory on, then off; then tests/gpu/oom_train.py. Checks:
#  1. each window left <trace stem>.w<N>.memory_snapshot.pickle that pickle.load opens, with
#     'segments' and 'device_traces' (its trace entries non-empty, with Python frames), and that
#     `python -m torch.cuda._memory_viz trace_plot` (memory_viz's own reader) turns into HTML;
#  2. its live bytes (the sizes of the 'active_allocated' blocks in 'segments') equal
#     memory_allocated() printed at the window's last step (the last TMEM line before the file's
#     mtime: the wrapper's hook runs just before stepprof's at the same step) within 1 MiB;
#  2b. the summary beside it (version 2): its series' last allocated value equals that same
#     memory_allocated() within 1 MiB, its peak is >= that end, and `stepprof memory --json` maps the
#     series onto the trace's clock (mapped, the peak inside the window give or take 50 ms); the series'
#     first value against memory_allocated() at the step before the history is shown (INFO, unchecked);
#  3. `stepprof report` names each file; `stepprof memory` shows the allocator's view (from the summary
#     beside it) with the driver's level at the window's end and the part outside torch's reserve;
#  4. a forced out-of-memory inside a window (tests/gpu/oom_train.py, third run: asks for 256 GiB at
#     iteration 14, catches torch.OutOfMemoryError) leaves <stem>.oom1.memory_snapshot.pickle, said on
#     stderr with its path, whose 'oom' trace entry names oom_train.py and the line that asked;
#  5. the cost: the window's median step time (stepprof's step durations) with torch_memory on
#     against off (one run each; shown, PASS when both runs recorded the same steps), and the
#     snapshot's own time (stepprof's verbose line; it falls in the step after the window).
# Prints "PASS/FAIL torch_memory ..." lines and ends with "torch_memory: N passed, M failed".
# $OUT (default /tmp/stepprof-tmem) gets torch_memory.txt (this output) and tmem_logs.tgz (logs, JSON).
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/stepprof-tmem}
W=${WORK:-/tmp/stepprof-tmem-work}
PY=${PYTHON:-python3}
LIMIT=${LIMIT:-88}
SP=$D/bin/stepprof
[ -x "$SP" ] || SP=$D/stepprof
mkdir -p "$O" && rm -rf "$W" && mkdir -p "$W" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
export PYTHONUNBUFFERED=1 PROG_STEP_LINES=0
SCHED=(--set marker.kind=optimizer --set schedule.wait=8 --set schedule.warmup=1 --set schedule.active=5
	--set schedule.repeat=2)

# run HOW [--set ...]: the wrapped program under stepprof into $W/HOW (trace/, log, report.json, report.txt)
run() {
	local how=$1 d=$W/$1 tr t=$((LIMIT - SECONDS))
	shift
	mkdir -p "$d"
	[ "$t" -gt 45 ] && t=45
	[ "$t" -lt 5 ] && { echo "$how: not run (LIMIT $LIMIT s spent)"; return; }
	if [ "$how" = oom ]; then
		timeout -k 5 "$t" env STEPPROF_VERBOSE=1 "$SP" run -o "$d/trace" --set marker.kind=optimizer \
			--set schedule.wait=8 --set schedule.warmup=1 --set schedule.active=12 --set schedule.repeat=1 "$@" \
			-- "$PY" "$HERE/oom_train.py" --iters 30 --oom-at 14 >"$d/log" 2>&1 </dev/null
	else
		timeout -k 5 "$t" env STEPPROF_VERBOSE=1 "$SP" run -o "$d/trace" "${SCHED[@]}" "$@" -- "$PY" \
			"$HERE/torch_memory_wrap.py" "$HERE/programs/gradscaler_resnet.py" --iters 36 --eval-every 1000 \
			>"$d/log" 2>&1 </dev/null
	fi
	echo "$how: exit $? after ${SECONDS}s; $(grep -a '^PROG ' "$d/log" | tail -1)"
	tr=$(ls -S "$d"/trace/*.sptrace 2>/dev/null | head -1)
	[ -n "$tr" ] || { tail -3 "$d/log" | sed 's/^/    log: /'; return; }
	"$SP" report --json "$tr" >"$d/report.json" 2>"$d/report.err"
	"$SP" report "$tr" >"$d/report.txt" 2>>"$d/report.err"
	"$SP" memory "$tr" -o "$d/memory.html" >"$d/memory.txt" 2>>"$d/report.err"
	"$SP" memory --json "$tr" -o "$d/memory.html" >"$d/memory.json" 2>>"$d/report.err"
}

main() {
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
	echo "torch_memory: stepprof $SP ($("$SP" --version 2>&1 | head -1)), LIMIT $LIMIT s"
	run on --set activities.torch_memory=true --set activities.torch_memory_entries=100000
	run off --set activities.torch_memory=false
	run oom --set activities.torch_memory=true
	"$PY" - "$W" "$PY" <<-'PYEOF'
	import glob, json, os, pickle, re, statistics, subprocess, sys
	w, py = sys.argv[1], sys.argv[2]
	res = []
	def say(ok, what, details=()):
	    res.append(ok)
	    print(f"{'PASS' if ok else 'FAIL'} torch_memory {what}")
	    for d in details:
	        print(f"    {d}")
	def load(p):
	    try:
	        return json.load(open(p))
	    except Exception:
	        return None
	on, off = load(w + "/on/report.json"), load(w + "/off/report.json")
	mj = load(w + "/on/memory.json")
	def series_checks(wid, f, alloc):
	    # the summary's version 2 beside snapshot f: its series against memory_allocated() (alloc) at the
	    # window's last step, its peak, and `memory --json` putting it on the trace's clock
	    sp = f[:-len(".memory_snapshot.pickle")] + ".memory_summary.txt"
	    sl = open(sp).read().splitlines() if os.path.exists(sp) else []
	    kv = {l.split(" ")[0]: l.split(" ")[1:] for l in sl if not l.startswith(("point ", "at_peak ", "top "))}
	    pts = [tuple(int(x) for x in l.split(" ")[1:4]) for l in sl if l.startswith("point ")]
	    if not sl or sl[0] != "stepprof-torch-memory 2" or not pts or "peak" not in kv:
	        say(False, f"window {wid}: {os.path.basename(sp)} is no version 2 summary with a series", sl[:3])
	        return
	    end, peak = pts[-1][1], int(kv["peak"][1])
	    say(abs(end - alloc) <= 1 << 20,
	        f"window {wid}: the summary's series ends at {end} allocated vs memory_allocated() {alloc} at the window's "
	        f"last step: differ by {end - alloc} bytes (<= 1 MiB)",
	        [f"{len(pts)} points; entries {kv.get('entries')}, cut {kv.get('cut')}"])
	    say(peak >= end, f"window {wid}: the series' peak {peak} >= its end {end}",
	        [l for l in sl if l.startswith("at_peak ")][:5])
	    st = [x for x in tmem if x[1] <= int(kv["history_start_us"][0]) / 1e6]
	    if st:
	        print(f"INFO torch_memory window {wid}: the series starts at {pts[0][1]} allocated; memory_allocated() at "
	              f"the step before the history {st[-1][2]}: differ by {pts[0][1] - st[-1][2]} bytes (not checked: "
	              f"blocks freed in the window count their requests rounded to 512 B)")
	    win = [x for x in (mj or {}).get("windows", []) if x["id"] == wid]
	    t = win[0].get("torch") if win else None
	    ok = bool(t) and t.get("mapped") is True and len(t["series"]["time_us"]) == len(pts) and \
	        -50e6 <= t["peak"]["at_ns"] <= win[0]["duration_ns"] + 50e6
	    say(ok, f"window {wid}: memory --json puts the series on the trace's clock: the peak at "
	        f"{t['peak']['at_ns'] / 1e6 if t and t.get('mapped') else None} ms of a "
	        f"{win[0]['duration_ns'] / 1e6 if win else None} ms window (50 ms slack)")
	log = open(w + "/on/log", errors="replace").read() if os.path.exists(w + "/on/log") else ""
	tmem = [(int(a), float(b), int(c)) for a, b, c in re.findall(r"^TMEM (\d+) (\S+) (\d+)$", log, re.M)]
	wins = [x["id"] for x in on["windows"]] if on else []
	say(wins == [0, 1], f"the run with torch_memory on recorded windows 0 and 1: {wins}")
	rep = open(w + "/on/report.txt").read() if os.path.exists(w + "/on/report.txt") else ""
	for wid in wins:
	    files = glob.glob(f"{w}/on/trace/*.w{wid}.memory_snapshot.pickle")
	    if not files:
	        say(False, f"window {wid}: no snapshot file", [l for l in log.splitlines() if "torch memory" in l][:3])
	        continue
	    f = files[0]
	    try:
	        s = pickle.load(open(f, "rb"))
	    except Exception as e:
	        say(False, f"window {wid}: pickle.load({f}) failed: {e!r}")
	        continue
	    tr = s.get("device_traces") or [[]]
	    ntr = sum(len(t) for t in tr)
	    py_frames = sum(1 for t in tr for e in t for fr in e.get("frames", []) if fr.get("filename", "").endswith(".py"))
	    say("segments" in s and "device_traces" in s and ntr > 0 and py_frames > 0,
	        f"window {wid}: {os.path.basename(f)} ({os.path.getsize(f) // 1024} KiB) loads with pickle: "
	        f"{len(s.get('segments', []))} segments, {ntr} trace entries, {py_frames} Python frames in them")
	    html = f + ".html"
	    p = subprocess.run([py, "-m", "torch.cuda._memory_viz", "trace_plot", f, "-o", html], capture_output=True,
	                       text=True, timeout=60)
	    say(p.returncode == 0 and os.path.exists(html) and os.path.getsize(html) > 1000,
	        f"window {wid}: memory_viz's trace_plot read it (exit {p.returncode})", [p.stderr[-300:]] if p.returncode else [])
	    live = sum(b["size"] for g in s["segments"] for b in g.get("blocks", []) if b.get("state") == "active_allocated")
	    mt = os.path.getmtime(f)
	    before = [t for t in tmem if t[1] <= mt]
	    if not before:
	        say(False, f"window {wid}: no TMEM line before the snapshot's mtime (wrapper hook not run?)")
	    else:
	        n, t, alloc = before[-1]
	        say(abs(live - alloc) <= 1 << 20,
	            f"window {wid}: live bytes in the snapshot {live} vs memory_allocated() {alloc} at the window's last "
	            f"step (optimizer step {n}): differ by {live - alloc} bytes (<= 1 MiB)",
	            [f"memory_allocated() at the steps around it: {[x[2] for x in tmem[max(0, n - 3):n + 2]]}",
	             f"the file's mtime is {(mt - t) * 1e3:.1f} ms after that TMEM line"])
	        series_checks(wid, f, alloc)
	    say(f"PyTorch memory snapshot of window {wid}: " in rep and f.split("/")[-1] in rep,
	        f"window {wid}: stepprof report names the file")
	    mem = open(w + "/on/memory.txt").read() if os.path.exists(w + "/on/memory.txt") else ""
	    ml = [l for l in mem.splitlines() if f".w{wid}.memory_summary.txt" in l]
	    mi = mem.find(ml[0]) if ml else -1
	    say(bool(ml) and f"in {sum(1 for g in s['segments'] for b in g.get('blocks', []) if b.get('state') == 'active_allocated')} live block" in ml[0],
	        f"window {wid}: stepprof memory shows the allocator's view beside the driver's",
	        mem[mi:mi + 900].splitlines()[:8] if mi >= 0 else ["no allocator line in stepprof memory's output"])
	if on and off:
	    son = {s["number"]: s["duration_ns"] / 1e6 for s in on["steps"]}
	    soff = {s["number"]: s["duration_ns"] / 1e6 for s in off["steps"]}
	    same = sorted(son) == sorted(soff) and len(son) > 0
	    d = [f"torch_memory on: median {statistics.median(son.values()):.3f} ms over {len(son)} steps" if son else "on: none",
	         f"torch_memory off: median {statistics.median(soff.values()):.3f} ms over {len(soff)} steps" if soff else "off: none"]
	    if son and soff:
	        d.append(f"window step time on / off: {statistics.median(son.values()) / statistics.median(soff.values()):.3f}x (medians, one run each)")
	    d += [l.split("stepprof: ", 1)[-1] for l in log.splitlines() if "PyTorch memory snapshot of window" in l]
	    say(same, "cost inside the windows (shown; PASS: both runs recorded the same steps)", d)
	else:
	    say(False, "cost: a run left no report")
	olog = open(w + "/oom/log", errors="replace").read() if os.path.exists(w + "/oom/log") else ""
	m = re.search(r"^OOM caught at iteration (\d+) line (\d+)", olog, re.M)
	said = [l for l in olog.splitlines() if "out of memory on device" in l]
	files = glob.glob(w + "/oom/trace/*.oom1.memory_snapshot.pickle")
	if not m or not files:
	    say(False, f"forced out-of-memory: caught {bool(m)}, snapshot files {files}", said[:2] + olog.splitlines()[-3:])
	else:
	    line = int(m.group(2))
	    s = pickle.load(open(files[0], "rb"))
	    ents = [e for t in s.get("device_traces", []) for e in t if e.get("action") == "oom"]
	    at = [f"{fr.get('filename', '?').split('/')[-1]}:{fr.get('line')}" for e in ents for fr in e.get("frames", [])]
	    ok = any(a == f"oom_train.py:{line}" for a in at) and said and files[0] in said[0]
	    say(ok, f"forced out-of-memory (iteration {m.group(1)}, oom_train.py:{line}): {files[0].split('/')[-1]} was said "
	        f"on stderr, and its 'oom' trace entry names the line",
	        said[:1] + [f"oom entries: {len(ents)}, sizes {[e.get('size') for e in ents][:3]}, frames {at[:4]}"])
	print(f"torch_memory: {sum(res)} passed, {len(res) - sum(res)} failed")
	sys.exit(0 if res and all(res) else 1)
	PYEOF
	local rc=$?
	grep -a '^stepprof' "$W/on/log" 2>/dev/null | grep -i 'torch memory\|warn\|fail' | head -5 | sed 's/^/    stepprof said: /'
	(cd "$W" && tar czf "$O/tmem_logs.tgz" --exclude='*.sptrace' --exclude='*.pickle' --exclude='*.html' . 2>/dev/null)
	echo "torch_memory: done in $SECONDS s"
	return $rc
}
main 2>&1 | tee "$O/torch_memory.txt"
exit "${PIPESTATUS[0]}"
