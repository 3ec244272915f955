#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pymem.sh - PyTorch's own memory view inside windows ([activities] torch_memory), without a GPU:
# the Python bridge turns on the stand-in torch.cuda.memory's allocator history at each window's
# first step and, at the window's end, pickles its _snapshot() beside the trace as
# <trace stem>.w<N>.memory_snapshot.pickle and turns it off. tests/e2e/pybridge/mem_prog.py runs
# with libstepprof preloaded, the stand-in CUPTI and the stand-in torch, by Debian's python3 and
# every pyenv CPython 3.10-3.13 present (absent ones are named and skipped). Schedule 3,1,2,2:
# windows 0 (steps 4-5) and 1 (steps 10-11), a step per optimizer step. Checked:
#  - every Python: the allocator's calls are exactly on (enabled='all', context='all',
#    stacks='python', max_entries = torch_memory_entries) in the hook that begins each window
#    (iterations 3 and 9), then the snapshot and off (enabled=None) in the hook that ends it
#    (iterations 5 and 11), all on the program's thread; nothing else; each file loads with
#    pickle, has 'segments' and 'device_traces', and its live bytes are the program's at the
#    window's last step; `stepprof report` names each file; `stepprof memory` shows the allocator's
#    live and reserved bytes and largest live block with its line from the summary beside it; the
#    summary's version 2 (the stand-in's trace of known levels): allocated and reserved over the
#    window from 4096 B, the peak (4096 + live + 5 MiB) and the lines live at it, in the summary, in
#    `memory`'s text, its --json and its page (hovered under node at the peak); the program's output
#    and steps unchanged;
#  - the stand-in's ring full and starting late: `cut 1`, the series from its first entry, said;
#    malformed entries (huge, negative, non-numeric, odd frames): skipped and counted, lines bounded;
#  - Debian's python3: off by default (no call, no file); the history's switch raising when turned
#    on (one `stepprof:` line, no file, nothing more in the second window, steps unchanged), and when
#    turned off (the first window's file is written, the second window gets nothing); a torch without
#    torch.cuda.memory (said once, no call); out of memory (the stand-in torch._C calls the
#    allocator's observers, then raises): from the first window on, a snapshot beside the trace
#    (<stem>.oom<K>.memory_snapshot.pickle: blocks only outside windows, with the window's
#    history inside one), said on stderr with its path, 4 a process at most; none with it off.
set -u
B=${SP_BUILD:?}
R=${SP_ROOT:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }
PROG=$R/tests/e2e/pybridge/mem_prog.py
CUPTI=$B/tests/e2e/libfakecupti.so
SP=$B/stepprof

# shellcheck source=tests/e2e/lib/pythons.sh
. "$(dirname "$0")/lib/pythons.sh"

# run NAME PY [ENV...]: mem_prog.py 16 in $T/NAME, optimizer marker, schedule 3,1,2,2, extra INI
# lines from $EXTRA (default: torch_memory on with 777 entries); exit status in rc
run() {
	local name=$1 py=$2
	shift 2
	mkdir -p "$T/$name"
	{
		printf '[profile]\noutput = %s\n[ranks]\nranks = all\n' "$T/$name/out"
		printf '[schedule]\nwait = 3\nwarmup = 1\nactive = 2\nrepeat = 2\n[marker]\nkind = optimizer\n'
		printf '[cupti]\nlibrary = %s\n' "$CUPTI"
		printf '%b' "${EXTRA-[activities]\ntorch_memory = true\ntorch_memory_entries = 777\n}"
	} >"$T/$name/sp.ini"
	(cd "$T/$name" && env -u STEPPROF_VERBOSE "$@" STEPPROF_CONFIG="$T/$name/sp.ini" FAKE_CUPTI="$CUPTI" \
		PYTHONPATH="$R/tests/e2e/pybridge" LD_PRELOAD="$PRE" timeout 60 "$py" "$PROG" 16 \
		>"$T/$name/stdout" 2>"$T/$name/stderr")
	echo $? >"$T/$name/rc"
}

# check NAME WHAT PYTHON-ASSERTIONS: on the run's stdout lines (out), stderr (err), exit status
# (rc), the allocator's calls (calls: lists of strings), the snapshot files by window (snaps:
# {N: the unpickled dict}), the steps of `report --json` (steps), `report`'s text (rep), `memory`'s (mem)
check() {
	local name=$1 what=$2 code=$3 tr
	tr=$(ls "$T/$name"/out/*.sptrace 2>/dev/null | head -1)
	if [ -n "$tr" ]; then
		"$SP" report --json "$tr" >"$T/$name/report.json" 2>"$T/$name/report.err"
		"$SP" report "$tr" >"$T/$name/report.txt" 2>>"$T/$name/report.err"
		"$SP" memory "$tr" -o "$T/$name/memory.html" >"$T/$name/memory.txt" 2>>"$T/$name/report.err"
		"$SP" memory --json "$tr" -o "$T/$name/memory.html" >"$T/$name/memory.json" 2>>"$T/$name/report.err"
	else
		echo null >"$T/$name/memory.json"
		echo null >"$T/$name/report.json"
		: >"$T/$name/report.txt"
		: >"$T/$name/memory.txt"
	fi
	if /usr/bin/python3 - "$T/$name" "$code" >"$T/$name/check" 2>&1 <<'EOF'; then ok "$name: $what"; else
import glob, json, os, pickle, re, shutil, subprocess, sys
d = sys.argv[1]
out, err = open(d + "/stdout").read(), open(d + "/stderr").read()
rc = int(open(d + "/rc").read())
calls = [l.split(" ", 2)[2].split(":") for l in out.splitlines() if l.startswith("prog: memory ")]
snaps = {}
for f in glob.glob(d + "/out/*.w[0-9]*.memory_snapshot.pickle"):
    m = re.search(r"\.w(\d+)\.memory_snapshot\.pickle$", f)
    assert m and os.path.basename(f).startswith(os.path.basename(glob.glob(d + "/out/*.sptrace")[0])[:-8] + ".w"), f
    with open(f, "rb") as fh:
        snaps[int(m.group(1))] = pickle.load(fh)
r = json.load(open(d + "/report.json"))
steps = [s["number"] for s in r["steps"]] if r else None
rep = open(d + "/report.txt").read()
mem = open(d + "/memory.txt").read()
mj = json.load(open(d + "/memory.json"))
sums = {int(re.search(r"\.w(\d+)\.memory_summary\.txt$", f).group(1)): open(f, "rb").read().decode()
        for f in glob.glob(d + "/out/*.w[0-9]*.memory_summary.txt")}
def v2(text):  # the summary version 2 as {key: [values...]} and its point and at_peak lines
    ls = text.splitlines()
    kv = {l.split(" ")[0]: l.split(" ")[1:] for l in ls[1:] if not l.startswith(("point ", "at_peak ", "top "))}
    pts = [tuple(int(x) for x in l.split(" ")[1:]) for l in ls if l.startswith("point ")]
    at = [l.split(" ", 3)[1:] for l in ls if l.startswith("at_peak ")]
    return ls[0], kv, pts, at
def page(w, at_ms, *want):  # hover the page of window w at at_ms: the readout has every want (node: the script above says if absent)
    if not shutil.which("node"):
        return
    p = subprocess.run(["node", os.environ["SP_ROOT"] + "/tests/e2e/check_memory_page.js", d + "/memory.html", str(w),
                        "%.3f" % at_ms, *want], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
MIB = 1 << 20
live = lambda s: sum(b["size"] for g in s["segments"] for b in g["blocks"] if b["state"] == "active_allocated")
exec(sys.argv[2])
EOF
		bad "$name: $what"
		sed 's/^/    /' "$T/$name/check" | tail -15
		sed 's/^/    stderr: /' "$T/$name/stderr" | tail -8
	fi
}

ON='
assert rc == 0, rc
assert out.splitlines()[-1] == "prog: done", out
want = []
for first, last in ((3, 5), (9, 11)):
    want += [["record", str(first), "MainThread", "all", "all", "python", "777"],
             ["snapshot", str(last), "MainThread", "all"],
             ["record", str(last), "MainThread", "None", "all", "all", str(sys.maxsize)]]
assert calls == want, calls
assert sorted(snaps) == [0, 1], sorted(snaps)
for w, last in ((0, 5), (1, 11)):
    s = snaps[w]
    assert "segments" in s and "device_traces" in s, s.keys()
    assert live(s) == 1000 + last, (w, live(s))
    assert s["device_traces"][0][0]["frames"][0]["line"] == 42
assert steps == [4, 5, 10, 11], steps
assert "stepprof:" not in err, err
for w in (0, 1):
    assert re.search(r"PyTorch memory snapshot of window %d: \S+\.w%d\.memory_snapshot\.pickle" % (w, w), rep), rep
for w, last in ((0, 5), (1, 11)):
    assert re.search(r"PyTorch\x27s caching allocator at the window\x27s end \(\S+\.w%d\.memory_summary\.txt\): %dB in 1 live "
                     r"block \(tensors\), 2\.00MiB reserved in 1 segment, of which" % (w, 1000 + last), mem), mem
    assert re.search(r"\n +%dB  train\.py:42 forward\n" % (1000 + last), mem), mem
assert mem.count("the driver\x27s view: no device memory records in this window") == 2, mem
assert sorted(sums) == [0, 1], sorted(sums)
for w, last in ((0, 5), (1, 11)):
    head, kv, pts, at = v2(sums[w])
    peak = 4096 + 1000 + last + 5 * MIB
    assert head == "stepprof-torch-memory 2" and kv["allocated"] == [str(1000 + last)] and kv["cut"] == ["0"], sums[w]
    assert kv["reserved"] == [str(2 * MIB)] and kv["entries"] == ["13", "0"], kv
    assert kv["series_start_us"] == kv["history_start_us"] and kv["peak"][1] == str(peak), kv
    assert pts[0][1:] == (4096, 2 * MIB) and pts[-1][1] == 1000 + last and max(p[1] for p in pts) == peak, pts
    assert max(p[2] for p in pts) == 10 * MIB and [p[0] for p in pts] == sorted(p[0] for p in pts), pts
    assert at == [[str(3 * MIB), "1", "model.py:7 big"], [str(2 * MIB), "2", "model.py:9 act"],
                  ["4096", "1", "(allocated before the window\x27s history: no stack)"],
                  [str(1000 + last), "1", "train.py:42 forward"]], at
    m = re.search(r"over the window \(the allocator\x27s history, on from [-+][\d.]+ ms, 13 events\): peak 5\.00MiB "
                  r"allocated at ([-+][\d.]+) ms from the window\x27s start; reserved 10\.00MiB at most\n"
                  r" +live at the peak by line.*\n +3\.00MiB +1 block +model\.py:7 big\n +2\.00MiB +2 blocks +model\.py:9 act\n"
                  r" +4\.00KiB +1 block +\(allocated before", mem.split("Window %d:" % w)[1])
    assert m, mem
    t = mj["windows"][w]["torch"]
    assert t["version"] == 2 and t["allocated_bytes"] == 1000 + last and t["cut"] is False and t["mapped"] is True, t
    assert t["peak"]["allocated_bytes"] == peak and abs(t["peak"]["at_ns"] / 1e6 - float(m.group(1))) < 0.002, t["peak"]
    assert t["series"]["allocated"] == [p[1] for p in pts] and t["series"]["time_us"] == [p[0] for p in pts], t["series"]
    assert [a["site"] for a in t["at_peak"]][:2] == ["model.py:7 big", "model.py:9 act"], t["at_peak"]
    assert 0 <= t["series_start_ns"] <= mj["windows"][w]["duration_ns"], (t, mj["windows"][w]["duration_ns"])
    page(w, t["peak"]["at_ns"] / 1e6 + 0.001, "PyTorch allocated 5.00MiB, reserved 10.00MiB")
'
n=0
for py in "${PYS[@]}"; do
	n=$((n + 1))
	run "on$n" "$py"
	check "on$n" "$("$py" -c 'import sys; print("CPython %d.%d" % sys.version_info[:2])'): history on per window, snapshots pickled beside the trace, off after each" "$ON"
done

run cut /usr/bin/python3 STANDIN_TRACE=cut
check cut "the ring of the allocator full and starting late: cut 1, the series from its first entry, said" '
assert rc == 0 and sorted(sums) == [0, 1], (rc, sorted(sums))
for w, last in ((0, 5), (1, 11)):
    head, kv, pts, at = v2(sums[w])
    assert kv["cut"] == ["1"] and kv["entries"] == ["777", "0"], kv
    assert int(kv["series_start_us"][0]) > int(kv["history_start_us"][0]) and pts[0][0] == int(kv["series_start_us"][0]), kv
    assert pts[0][1] == 0 and pts[-1][1] == 1000 + last and int(kv["peak"][1]) == 1000 + last + 4096, (pts[:3], kv)
    t = mj["windows"][w]["torch"]
    assert t["cut"] is True and t["series_start_ns"] > 0, t
    ms = t["series_start_ns"] / 1e6
    assert re.search(r"the allocator\x27s history was cut: the series starts at \+%.3f ms from the window\x27s start, not "
                     r"at the window\x27s start \(the window\x27s events filled the ring: raise torch_memory_entries" % ms, mem), mem
'

EXTRA='[activities]\ntorch_memory = true\ntorch_memory_entries = 600000\n' run cut_bound /usr/bin/python3 STANDIN_TRACE=cut
check cut_bound "600000 entries: the summary reads the latest 500000, said as cut 2" '
assert rc == 0 and sorted(sums) == [0, 1], (rc, sorted(sums))
for w, last in ((0, 5), (1, 11)):
    head, kv, pts, at = v2(sums[w])
    assert kv["cut"] == ["2"] and kv["entries"] == ["500000", "0"] and len(pts) <= 1001, (kv, len(pts))
    assert pts[-1][1] == 1000 + last and len(sums[w]) < 64 << 10, pts[-3:]
assert mem.count("the summary reads the latest 500000 events; the snapshot\x27s pickle has them all") == 2, mem
'

run hostile /usr/bin/python3 STANDIN_TRACE=hostile
check hostile "malformed trace entries and odd frames: skipped or bounded, the rest as before" '
assert rc == 0 and sorted(sums) == [0, 1] and "stepprof:" not in err, (rc, sorted(sums), err)
for w, last in ((0, 5), (1, 11)):
    head, kv, pts, at = v2(sums[w])
    assert kv["entries"] == ["15", "6"] and kv["peak"][1] == str(4096 + 1000 + last + 5 * MIB + 512), kv
    assert max(len(l) for l in sums[w].splitlines()) <= 400 and len(sums[w]) < 64 << 10, sums[w]
    assert [a[:2] for a in at][-1] == ["512", "1"] and at[-1][2].startswith("evil fileevil file"), at
    assert len(at[-1][2]) == 300 and "\n" not in at[-1][2], at[-1]
assert "malformed ones skipped" in mem and mj["windows"][0]["torch"]["skipped_entries"] == 6, mem
'

EXTRA='' run default /usr/bin/python3
check default "off by default: no allocator call, no file" '
assert rc == 0 and calls == [] and snaps == {} and steps == [4, 5, 10, 11], (rc, calls, snaps, steps)
assert "stepprof:" not in err and "PyTorch memory snapshot" not in rep, err
'

run raise_on /usr/bin/python3 STANDIN_MEMORY_RAISES=1
check raise_on "the history refused when turned on: one line, no file, off for good, steps unchanged" '
assert rc == 0 and out.splitlines()[-1] == "prog: done", (rc, out)
assert calls == [], calls
assert snaps == {} and steps == [4, 5, 10, 11], (snaps, steps)
lines = [l for l in err.splitlines() if l.startswith("stepprof:")]
assert len(lines) == 1 and "torch memory: turning on" in lines[0] and "RuntimeError: stand-in torch" in lines[0], lines
'

run raise_off /usr/bin/python3 STANDIN_MEMORY_RAISES=2
check raise_off "the history refused when turned off: window 0 written, off for good after" '
assert rc == 0 and out.splitlines()[-1] == "prog: done", (rc, out)
assert calls == [["record", "3", "MainThread", "all", "all", "python", "777"], ["snapshot", "5", "MainThread", "all"]], calls
assert sorted(snaps) == [0] and live(snaps[0]) == 1005 and steps == [4, 5, 10, 11], (snaps, steps)
lines = [l for l in err.splitlines() if l.startswith("stepprof:")]
assert len(lines) == 1 and "window 0" in lines[0] and "off" in lines[0], lines
'

run snap_raises /usr/bin/python3 STANDIN_SNAPSHOT_RAISES=1
check snap_raises "the snapshot raises: history turned off all the same, no file, off for good" '
assert rc == 0, rc
assert [c[0] for c in calls] == ["record", "snapshot", "record"] and calls[2][3] == "None", calls
assert snaps == {} and steps == [4, 5, 10, 11], (snaps, steps)
assert len([l for l in err.splitlines() if l.startswith("stepprof:")]) == 1, err
'

run nomem /usr/bin/python3 STANDIN_NO_CUDA_MEMORY=1
check nomem "no torch.cuda.memory in sys.modules: said once, nothing done" '
assert rc == 0 and snaps == {} and steps == [4, 5, 10, 11], (rc, snaps, steps)
lines = [l for l in err.splitlines() if l.startswith("stepprof:")]
assert len(lines) == 1 and "torch.cuda.memory is not imported" in lines[0], lines
'

run oom /usr/bin/python3 OOM_AT=1,7,10,12,13,14
check oom "out of memory: a snapshot before the error reaches the program, said with its path; 4 at most" '
assert rc == 0 and out.splitlines()[-1] == "prog: done", (rc, out)
assert [l for l in out.splitlines() if l.startswith("prog: oom")] == ["prog: oom %d" % i for i in (1, 7, 10, 12, 13, 14)]
snaps_at = [(c[1], c[3]) for c in calls if c[0] == "snapshot"]
assert snaps_at == [("5", "all"), ("7", "None"), ("10", "all"), ("11", "all"), ("12", "None"), ("13", "None")], snaps_at
ooms = {}
for f in glob.glob(d + "/out/*.oom*.memory_snapshot.pickle"):
    ooms[int(re.search(r"\.oom(\d+)\.memory_snapshot\.pickle$", f).group(1))] = pickle.load(open(f, "rb"))
assert sorted(ooms) == [1, 2, 3, 4] and sorted(snaps) == [0, 1], (sorted(ooms), sorted(snaps))
assert ooms[1]["device_traces"] == [[]] and ooms[2]["device_traces"][0][0]["iteration"] == 10, ooms
assert live(ooms[2]) == 1010 and live(ooms[4]) == 1013, (live(ooms[2]), live(ooms[4]))
lines = [l for l in err.splitlines() if l.startswith("stepprof:")]
assert len(lines) == 4 and all("out of memory on device 0 (1099511627776 bytes asked)" in l for l in lines), lines
assert "oom1.memory_snapshot.pickle (outside windows: blocks only, no history)" in lines[0], lines[0]
assert "oom2.memory_snapshot.pickle (with the window" in lines[1] and lines[3].endswith("no more out-of-memory snapshots in this process"), lines
assert steps == [4, 5, 10, 11], steps
'

EXTRA='' run oom_off /usr/bin/python3 OOM_AT=7,10
check oom_off "out of memory with torch_memory off: no observer, nothing said" '
assert rc == 0 and calls == [] and not glob.glob(d + "/out/*.memory_snapshot.pickle") and "stepprof:" not in err, (rc, calls, err)
'

command -v node >/dev/null || echo "skipped: hovering the memory pages (no node here: Debian's nodejs runs them)"
[ $fail = 0 ] && echo "pymem: all passed"
exit $fail
