#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pystacks.sh [BUILD_DIR] - Python source lines behind kernels, on a GPU machine, in one call (about
# 3 minutes): run from the repository root; without BUILD_DIR it lays dist/stepprof (make dist)
# flat as a build dir, as device-suite.sh does. Prints PASS/FAIL lines and tables; exit 0 only if
# every check passes. Works in ${WORK:-/tmp/stepprof-pystacks}; with OUT set, copies there the 7
# files that debug a `lines` failure (torch_trace.json.gz: torch.profiler's Chrome trace;
# torch_table.tsv: the extraction, one line per kernel; torch_lines.json; report_lines.txt and
# .json; lines.sptrace; logs.txt: both runs' output), each under 16 MiB, no folder.
#  1. lines: tests/gpu/pyline_train.py under stepprof (stacks = python) and, in another process,
#     under torch.profiler(with_stack=True) (one CUPTI subscriber per process): the top-10 of
#     kernel time by innermost frame of the program's own code must agree (tests/gpu/pystacks_check.py;
#     torch's side read from its Chrome trace by tests/gpu/torch_trace_lines.py).
#  2. memory: `stepprof memory` names the Python lines (BIG_A, BIG_B) of the two largest blocks
#     alive at the peak, allocated before the window.
#  3. cost: bench.py's workers (mlp: 8 x Linear(4096) + Adam; add: 2000 tiny kernels a step) in a
#     window with stacks = false, python, both (2 rounds, rotated order): median in-window step
#     over the same without stacks, and the cost per launch; target <= 1.10x on the MLP (python).
set -u
R=$(pwd)
W=${WORK:-/tmp/stepprof-pystacks}
PY=${PYTHON:-python3}
ROUNDS=${ROUNDS:-2}
if [ $# -ge 1 ]; then
	B=$(cd "$1" && pwd)
else
	B=/tmp/sppy-build
	rm -rf "$B" && mkdir -p "$B" && cp dist/stepprof/bin/stepprof dist/stepprof/lib/* "$B/" || { echo "FAIL no dist/stepprof (make dist)"; exit 2; }
fi
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH PYTORCH_CUDA_ALLOC_CONF
[ -n "${OUT:-}" ] && { mkdir -p "$OUT" || exit 2; }
rm -rf "$W" && mkdir -p "$W" || exit 2
cd "$W" || exit 2
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# ini FILE OUTDIR STACKS SKIP ACTIVE: one window of ACTIVE steps after SKIP (a warmup step included)
ini() {
	printf '[profile]\nenabled = true\noutput = %s\n[schedule]\nskip_first = %s\nwait = 0\nwarmup = 1\nactive = %s\nrepeat = 1\n' \
		"$2" "$(($4 - 1))" "$5" >"$1"
	printf '[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n[activities]\nstacks = %s\nstack_depth = 64\n' "$3" >>"$1"
	"$B/stepprof" check "$1" >/dev/null || { echo "stepprof check $1 failed"; cat "$1"; return 1; }
}
trace_in() { find "$1" -name '*.sptrace' | head -1; }

# ---- 1 and 2: lines and memory ----
SKIP=6 ACTIVE=4
ini lines.ini "$W/lines" python $SKIP $ACTIVE || exit 2
STEPPROF_CONFIG=$W/lines.ini LD_PRELOAD=$B/libstepprof.so timeout 120 "$PY" "$R/tests/gpu/pyline_train.py" \
	--steps 12 >lines.log 2>&1 || fail "lines: pyline_train.py under stepprof exited $?: $(tail -5 lines.log)"
T=$(trace_in "$W/lines")
timeout 120 "$PY" "$R/tests/gpu/pyline_train.py" --steps 12 --skip $SKIP --active $ACTIVE \
	--torch-profiler torch_lines.json --torch-trace torch_trace.json.gz --torch-table torch_table.tsv >torch.log 2>&1 || fail "lines: pyline_train.py under torch.profiler exited $?: $(tail -5 torch.log)"
grep -a '^stepprof:' lines.log | head -5
if [ -n "$T" ] && [ -s torch_lines.json ]; then
	"$B/stepprof" report --by line --wide "$T" >report_lines.txt 2>&1
	"$B/stepprof" report --by line --json "$T" >report_lines.json 2>&1
	sed -n '/^GPU kernel time by source line/,/^Total/p' report_lines.txt | head -24
	"$PY" "$R/tests/gpu/pystacks_check.py" lines report_lines.json torch_lines.json "$R/tests/gpu/pyline_train.py" &&
		pass "lines: top-10 source lines by kernel time agree with torch.profiler(with_stack=True)" ||
		fail "lines: stepprof --by line and torch.profiler disagree (above)"
	"$B/stepprof" memory "$T" -o memory.html >memory.txt 2>&1
	sed -n '1,12p' memory.txt
	"$PY" "$R/tests/gpu/pystacks_check.py" memory memory.txt "$R/tests/gpu/pyline_train.py" &&
		pass "memory: the largest blocks alive at the peak name their Python lines (BIG_A, BIG_B)" ||
		fail "memory: the Python lines of the largest blocks are not named (above)"
	"$B/stepprof" stacks --kind launch "$T" -o launch.folded >/dev/null 2>&1
	grep -q 'pyline_train.py:[0-9]*)' launch.folded && pass "stacks: folded launch stacks hold Python frames" ||
		fail "stacks: no Python frame in $W/launch.folded"
else
	fail "lines: no stepprof trace ($T) or no torch.profiler rows"
fi

# ---- 3: cost in a window, with and without stacks ----
CS=8 CA=20 CSTEPS=33
for rnd in $(seq 1 "$ROUNDS"); do
	order="false python both"
	[ $((rnd % 2)) -eq 0 ] && order="both python false"
	for wl in mlp add; do
		for st in $order; do
			d=$W/cost/$wl-$st-r$rnd
			mkdir -p "$d"
			ini "$d/sp.ini" "$d/trace" "$st" $CS $CA || exit 2
			STEPPROF_CONFIG=$d/sp.ini LD_PRELOAD=$B/libstepprof.so timeout 120 "$PY" "$R/bench/bench.py" worker \
				--workload $wl --steps $CSTEPS >"$d/out.log" 2>&1 || fail "cost: $wl stacks=$st round $rnd exited $?: $(tail -3 "$d/out.log")"
		done
	done
done
"$PY" "$R/tests/gpu/pystacks_check.py" cost "$W/cost" "$B/stepprof" $CS $CA && pass "cost: stacks = python within 1.10x of no stacks on the MLP" ||
	fail "cost: over target or a run failed (above)"
if [ -n "${OUT:-}" ]; then
	{ echo "== lines.log (under stepprof)"; cat lines.log; echo "== torch.log (under torch.profiler)"; cat torch.log; } >logs.txt 2>/dev/null
	[ -n "$T" ] && cp "$T" lines.sptrace
	for f in torch_trace.json.gz torch_table.tsv torch_lines.json report_lines.txt report_lines.json lines.sptrace logs.txt; do
		[ -f "$f" ] && [ "$(stat -c %s "$f")" -lt $((16 << 20)) ] && cp "$f" "$OUT/"
	done
	echo "debug files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
fi
echo "pystacks: $fails failed"
[ "$fails" -eq 0 ]
