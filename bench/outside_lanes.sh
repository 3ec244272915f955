#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/outside_lanes.sh - issue 20's measurement in one call on a 4-GPU host: two bench/outside.sh
# lanes at once, each profiled run beside its unprofiled twin on one shared CPU (docs/BENCHMARKS.md,
# "Eleventh session" for why). Lane A (GPU 0, twin GPU 1, CPU 5): the add loop with api, once and the
# CUPTI floor, 3 rounds; the learn workload learning from the hooks, 3 rounds; the automatic marker on
# add, 3 rounds. Lane B (GPU 2, twin GPU 3, CPU 45): MLP and llm.c with api and once, 2 rounds; the
# automatic marker on MLP, 2 rounds. Run from the repository root after `make dist` (llm.c built in
# .thirdparty/llm.c, else lane B measures MLP alone). Works in /tmp/stepprof-lanes (each part's
# outside.md/outside.json, log and runs/ with every run's log); prints every table; with OUT set
# (the device machine's result folder, which hands back only a few files) packs the work folder,
# traces left out, into $OUT/lanes.tgz. About 450 s on 4 x H200 (thirteenth session). Exit status:
# 0, or 1 if a part found a problem or failed.
set -u
cd "$(dirname "$0")/.." || exit 2
R=/tmp/stepprof-lanes
rm -rf "$R" && mkdir -p "$R" || exit 2
T0=$(date +%s)
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
[ -e dist/stepprof/bin/stepprof ] || { echo "outside_lanes: no dist/stepprof (run 'make dist' first)"; exit 2; }
BA=/tmp/spbA
rm -rf "$BA" && mkdir -p "$BA" && cp dist/stepprof/bin/stepprof dist/stepprof/lib/* "$BA/" || exit 2
left() { echo $((560 - ($(date +%s) - T0))); }
laneA() {
	OUT=$R/add OUTSIDE_BUILD=/tmp/spoA CPUS=5 ROUNDS=3 WORKLOADS=add CONFIGS=api,once LEARN=0 \
		OUTSIDE_ARGS="--twin 1 --twin-cpus same" timeout 290 bash bench/outside.sh >"$R/add-run.txt" 2>&1
	echo "add rc $? ($(($(date +%s) - T0)) s)"
	timeout 170 python3 bench/outside.py run --build "$BA" --out "$R/learn" --rounds 3 --steps 150 \
		--workloads learn --configs auto-hooks --cpus 5 --twin 1 --twin-cpus same >"$R/learn-run.txt" 2>&1
	echo "learn rc $? ($(($(date +%s) - T0)) s)"
	OUT=$R/autoA OUTSIDE_BUILD=/tmp/spoA2 CPUS=5 ROUNDS=3 WORKLOADS=add CONFIGS=auto LEARN=0 \
		OUTSIDE_ARGS="--twin 1 --twin-cpus same" timeout "$(left)" bash bench/outside.sh >"$R/autoA-run.txt" 2>&1
	echo "autoA rc $? ($(($(date +%s) - T0)) s)"
}
laneB() {
	export CUDA_VISIBLE_DEVICES=2
	OUT=$R/ml OUTSIDE_BUILD=/tmp/spoB CPUS=45 ROUNDS=2 WORKLOADS=mlp,llmc CONFIGS=api,once LEARN=0 \
		OUTSIDE_ARGS="--twin 3 --twin-cpus same" timeout 380 bash bench/outside.sh >"$R/ml-run.txt" 2>&1
	echo "ml rc $? ($(($(date +%s) - T0)) s)"
	OUT=$R/autoB OUTSIDE_BUILD=/tmp/spoB2 CPUS=45 ROUNDS=2 WORKLOADS=mlp CONFIGS=auto LEARN=0 \
		OUTSIDE_ARGS="--twin 3 --twin-cpus same" timeout "$(left)" bash bench/outside.sh >"$R/autoB-run.txt" 2>&1
	echo "autoB rc $? ($(($(date +%s) - T0)) s)"
}
nvidia-smi -L
laneA >"$R/laneA.txt" 2>&1 &
laneB >"$R/laneB.txt" 2>&1 &
wait
cat "$R/laneA.txt" "$R/laneB.txt"
for f in add learn autoA ml autoB; do
	echo "== $f"
	grep -hE '^outside: ' "$R/$f-run.txt" | cut -c1-220
	sed -n '/^Twin-paired/,/^Problems/p' "$R/$f/outside.md" 2>/dev/null | grep -E '^\||^Problems|^-' | cut -c1-300
done
echo "($(($(date +%s) - T0)) s)"
[ -n "${OUT:-}" ] && tar czf "$OUT/lanes.tgz" -C "$R" --exclude='*.sptrace' --exclude='*.so' . 2>/dev/null
! grep -q " rc [1-9]" "$R/laneA.txt" "$R/laneB.txt"
