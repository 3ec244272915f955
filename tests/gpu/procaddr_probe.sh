#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# procaddr_probe.sh [BUILD_DIR] - on a GPU machine, from the repository root: which runtime markers
# a program with the CUDA runtime linked in statically (nvcc's default) can park with. For each
# (program call, api marker) pair it runs procaddr_probe (built here with nvcc) under stepprof with
# a repeating schedule and detach_between = always, and prints one row: parks between windows
# (count of "detached from CUPTI ... until the next window"), the recorded steps as the schedule
# says or not, and stepprof's reason when it did not park (the proof's verdict: which driver calls
# came, how many). BUILD_DIR: a build folder, or dist/stepprof laid out flat (the default, after
# 'make dist'). Output in ${OUT:-/tmp/stepprof-procaddr}. Exit 0 when cudaDeviceSynchronize,
# cudaStreamSynchronize and cudaEventSynchronize park with exact steps (what llm.c needs), else 1.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/stepprof-procaddr}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
B=${1:-}
if [ -z "$B" ]; then
	B=$OUT/build && mkdir -p "$B" && cp "$ROOT"/dist/stepprof/bin/stepprof "$ROOT"/dist/stepprof/lib/* "$B/" || exit 2
fi
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
"$CUDA_HOME/bin/nvcc" -O2 -arch=sm_90 "$ROOT/tests/gpu/procaddr_probe.cu" -o "$OUT/probe" || exit 2
ITERS=60
want="19 20 30 31 41 42 52 53" # skip_first 10, wait 8, warmup 1, active 2, repeat 4
bad=0
printf '| program call | marker | parks | steps | stepprof says |\n|---|---|---|---|---|\n'
for pair in device:cudaDeviceSynchronize stream:cudaStreamSynchronize event:cudaEventSynchronize \
	event:cudaEventRecord memcpy:cudaMemcpy memcpyasync:cudaMemcpyAsync graph:cudaGraphLaunch \
	device:cuCtxSynchronize stream:cuStreamSynchronize event:cuEventSynchronize; do
	which=${pair%%:*} mk=${pair#*:} d=$OUT/$which-$mk
	mkdir -p "$d"
	printf '[profile]\noutput = %s\n[schedule]\nskip_first = 10\nwait = 8\nwarmup = 1\nactive = 2\nrepeat = 4\n[marker]\nkind = api\npattern = %s\n[cupti]\ndetach_between = always\n' \
		"$d/trace" "$mk" >"$d/stepprof.ini"
	STEPPROF_VERBOSE=1 STEPPROF_CONFIG=$d/stepprof.ini LD_PRELOAD=$B/libstepprof.so timeout 120 \
		"$OUT/probe" "$ITERS" "$which" >"$d/stdout.log" 2>"$d/stderr.log"
	rc=$?
	parks=$(grep -cE "detached from CUPTI in step [0-9]+ until the next window" "$d/stderr.log")
	got=$("$B/stepprof" steps $(find "$d/trace" -name '*.sptrace') 2>/dev/null | awk '/^ *[0-9]+ / {printf "%s ", $1}' | sed 's/ $//')
	steps=$([ "$got" = "$want" ] && echo exact || echo "got [$got]")
	why=$(grep -aE "hooks|stands for|driver" "$d/stderr.log" | grep -v "detached from CUPTI\|re-attached" | head -2 |
		sed 's/^stepprof: //' | tr '\n' ' ' | cut -c1-220)
	[ $rc -eq 0 ] && grep -q "^probe ok" "$d/stdout.log" || why="probe exited $rc: $(tail -2 "$d/stderr.log" | tr '\n' ' ') $why"
	printf '| %s | %s | %s | %s | %s |\n' "$which" "$mk" "$parks" "$steps" "$why"
	case $mk in cudaDeviceSynchronize | cudaStreamSynchronize | cudaEventSynchronize)
		[ "$parks" -ge 1 ] && [ "$steps" = exact ] || bad=1 ;;
	esac
done
exit $bad
