#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ops_after.sh [DIST] - does [activities] ops/modules cost anything after its window (issue 41.5)?
# On the GPU machine, from the repo root after `make dist`: ROUNDS (3) interleaved rounds of
# gradscaler_resnet.py (ITERS 120) under stepprof with ops and modules on, then off, schedule wait
# 10, warmup 2, active 10 (the window: optimizer steps 13-22); each run's in-process ratio is the
# median STEP time after the window (iterations 30 to the end) over the median before it (3-9).
# ops_state.py prints torch's profiler state and the global module hooks at every step.
# Output $OUT/ops_after.txt; logs $OUT/ops_after.tgz.
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
P=$HERE/../programs
PY=${PYTHON:-python3}
O=${OUT:-/tmp}
W=${WORK:-/tmp/ops_after}
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
export PYTHONUNBUFFERED=1 PROG=${PROG:-gradscaler_resnet}
ARGS=${ARGS:---iters ${ITERS:-120} --eval-every 1000}
{
for r in $(seq "${ROUNDS:-3}"); do
	for c in on off; do
		x=$([ $c = on ] && echo true || echo false)
		# shellcheck disable=SC2086
		STEPPROF_VERBOSE=1 "$D/bin/stepprof" run -o "$W/$c$r" --set marker.kind=optimizer --set schedule.wait=10 \
			--set schedule.warmup=2 --set schedule.active=10 --set schedule.repeat=1 --set activities.ops=$x \
			--set activities.modules=$x -- "$PY" "$HERE/ops_state.py" "$P/$PROG.py" $ARGS >"$c$r.log" 2>&1 </dev/null
		echo "$c$r: exit $? $(grep -a '^PROG ' "$c$r.log")"
	done
done
"$PY" - "$W" <<'PY'
import glob, os, re, statistics, sys
res = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
    name = os.path.basename(f)[:-4]
    st, states = {}, []
    for line in open(f, errors="replace"):
        m = re.match(r"STEP (\d+) ([0-9.]+)$", line.strip())
        if m:
            st[int(m.group(1))] = float(m.group(2))
        if line.startswith("OPSTATE"):
            states.append(line.split(None, 2)[1:])
    last = max(st) if st else 0
    before = [v for k, v in st.items() if 3 <= k <= 9]
    after = [v for k, v in st.items() if 30 <= k < last]
    if not before or not after:
        print(f"{name}: no STEP lines"); continue
    r = statistics.median(after) / statistics.median(before)
    res.setdefault(name.rstrip("0123456789"), []).append(r)
    seen = sorted({s[1].strip() for s in states if int(s[0]) >= 30})
    print(f"{name}: before {statistics.median(before):.2f} ms after {statistics.median(after):.2f} ms "
          f"(q1 {statistics.quantiles(after, n=4)[0]:.2f} q3 {statistics.quantiles(after, n=4)[2]:.2f}) "
          f"ratio {r:.3f}; state after the window: {seen}")
for k, v in sorted(res.items()):
    print(f"ops {k}: in-process ratios {', '.join(f'{x:.3f}' for x in v)} (median {statistics.median(v):.3f})")
PY
} 2>&1 | tee "$O/ops_after.txt"
tar czf "$O/ops_after.tgz" ./*.log 2>/dev/null
