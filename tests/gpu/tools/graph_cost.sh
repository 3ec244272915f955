#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# graph_cost.sh [DIST] - what a CUDA-graph program pays after its window (issue 37.1): on the GPU
# machine, from the repo root after `make dist`. ROUNDS (3) interleaved rounds of
# tests/gpu/programs/compile_infer_graphs.py 300 (torch.compile reduce-overhead inference: a graph
# replay and an eager op per iteration) without stepprof, under the default configuration
# (graph_detach = true: detached after the window) and with graph_detach = false (subscribed for the
# rest of the run). Each profiled run's in-process ratio: the median STEP time after the window
# (from 6 steps after its last step) over the median before it (steps 3 to 2 before its first);
# the plain run's over the same steps of the round's default run. Output $OUT/graph_cost.txt.
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PYTHON:-python3}
O=${OUT:-/tmp}
W=${WORK:-/tmp/graph_cost}
rm -rf "$W" && mkdir -p "$W" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
export PYTHONPATH=$ROOT/tests/gpu/corpus:$ROOT/tests/gpu/programs
P=$ROOT/tests/gpu/programs/compile_infer_graphs.py
{
for r in $(seq "${ROUNDS:-3}"); do
	for c in plain detach stay; do
		d=$W/$c$r
		mkdir -p "$d"
		case $c in
		plain) timeout 200 "$PY" "$P" 300 >"$d/stdout" 2>"$d/stderr" ;;
		*) env STEPPROF_PROFILE_OUTPUT="$d/trace" STEPPROF_VERBOSE=1 \
			STEPPROF_CUPTI_GRAPH_DETACH=$([ $c = detach ] && echo true || echo false) LD_PRELOAD="$D/lib/libstepprof.so" \
			timeout 200 "$PY" "$P" 300 >"$d/stdout" 2>"$d/stderr" ;;
		esac
		echo "$c$r: exit $? $(grep -c '^STEP' "$d/stdout") STEP lines; $(grep -o 'detached from CUPTI in step [0-9]*\|not detaching from CUPTI in step [0-9]*' "$d/stderr" | head -1)"
		[ $c = plain ] || "$D/bin/stepprof" report "$d"/trace/*.sptrace 2>/dev/null | grep -o 'steps [0-9]*-[0-9]*' | head -1 >"$d/window"
	done
done
"$PY" - "$W" "${ROUNDS:-3}" <<'PY'
import re, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
def steps(d):
    return {int(m.group(1)): float(m.group(2)) for m in (re.match(r"STEP (\d+) ([0-9.]+)$", l.strip()) for l in open(f"{d}/stdout")) if m}
res = {}
for r in range(1, rounds + 1):
    try:
        a, b = map(int, re.findall(r"\d+", open(f"{w}/detach{r}/window").read())[:2])
    except (OSError, ValueError):
        print(f"round {r}: no window in the default run"); continue
    for c in ("plain", "detach", "stay"):
        st = steps(f"{w}/{c}{r}")
        if c != "plain":
            try:
                a, b = map(int, re.findall(r"\d+", open(f"{w}/{c}{r}/window").read())[:2])
            except (OSError, ValueError):
                pass
        pre = [v for k, v in st.items() if 3 <= k <= a - 2]
        post = [v for k, v in st.items() if b + 6 <= k < max(st)]
        if pre and post:
            x = statistics.median(post) / statistics.median(pre)
            res.setdefault(c, []).append(x)
            print(f"{c}{r}: window {a}-{b}; before {statistics.median(pre):.4f} ms ({len(pre)}), after {statistics.median(post):.4f} ms ({len(post)}): {x:.3f}")
for c, v in res.items():
    print(f"{c}: after/before {', '.join(f'{x:.3f}' for x in v)}; median {statistics.median(v):.3f}")
PY
} 2>&1 | tee "$O/graph_cost.txt"
