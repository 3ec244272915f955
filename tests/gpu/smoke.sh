#!/usr/bin/env bash
# smoke.sh DIST - quick look at the collector on a GPU machine: the workload and the MLP under
# several markers, with verbose stepprof notes; traces land in $OUT (or /tmp/stepprof-smoke).
set -u
D=$(cd "${1:-dist/stepprof}" && pwd); O=${OUT:-/tmp/stepprof-smoke}; mkdir -p "$O"
export PATH=/usr/local/cuda/bin:$PATH STEPPROF_VERBOSE=1
W=$O/workload
nvcc -O2 -arch=sm_90 tests/gpu/workload.cu -o "$W" -lcuda || exit 1
run() { # name, env..., -- cmd
	local name=$1; shift
	echo "=== $name"
	env STEPPROF_PROFILE_OUTPUT="$O/$name" "$@" > "$O/$name.log" 2>&1; echo "rc=$?"
	tail -n 15 "$O/$name.log"
	ls -la "$O/$name" 2>/dev/null
	for t in "$O/$name"/*.sptrace; do [ -f "$t" ] && "$D/bin/stepprof" report "$t" 2>&1 | head -30; done
}
run kernel STEPPROF_MARKER_KIND=kernel STEPPROF_MARKER_PATTERN=step_marker STEPPROF_SCHEDULE_WAIT=2 \
	STEPPROF_SCHEDULE_ACTIVE=2 "$D/bin/stepprof" run -- "$W" 30
run auto STEPPROF_SCHEDULE_WAIT=2 "$D/bin/stepprof" run -- "$W" 40
run api STEPPROF_MARKER_KIND=api STEPPROF_MARKER_PATTERN=cudaDeviceSynchronize "$D/bin/stepprof" run -- "$W" 30
run range STEPPROF_MARKER_KIND=profiler_range "$D/bin/stepprof" run -- "$W" 30 --profiler-range
run mlp_auto "$D/bin/stepprof" run -- python3 tests/gpu/mlp_train.py --steps 40
