#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# park_crash_loop.sh [SECONDS] [OLD_DIST] - on the GPU machine, from the repository root after `make
# dist`: the launch-bound add loop (bench/outside.py worker add, 200 steps) under the api marker and
# a repeating schedule (wait 20, warmup 1, active 20, repeat 0: four windows, parks between them),
# three programs a GPU on every GPU, each pinned to a CPU of its own, run again and again until
# SECONDS (430) are nearly over, with tests/gpu/tools/segv_bt.c preloaded beside libstepprof. With
# OLD_DIST (another `make dist` tree, e.g. a commit before a fix) the odd slots run that build, the
# even ones dist/. Prints, per build, runs and runs that died or hung, then each failed run's
# backtraces and last stepprof lines; exit 1 if any run of dist/ failed. Output in $OUT: runs.txt and
# failed.tgz (every failed run's stderr; the device machine hands back only a few files).
# Fourteenth session (4 x H200): 10 of 478 runs failed before the launch drain (docs/BENCHMARKS.md).
cd "$(dirname "$0")/../../.." || exit 2
SECS=${1:-430} OLD=${2:-}
R=${OUT:-/tmp/park-loop}; mkdir -p "$R"; T0=$(date +%s); END=$((T0 + SECS))
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
rm -rf /tmp/plnew /tmp/plold && mkdir -p /tmp/plnew /tmp/plold || exit 2
cp dist/stepprof/bin/stepprof dist/stepprof/lib/* /tmp/plnew/ || exit 2
[ -n "$OLD" ] && { cp "$OLD"/stepprof/bin/stepprof "$OLD"/stepprof/lib/* /tmp/plold/ || exit 2; }
gcc -O1 -g -shared -fPIC -o /tmp/plnew/segv_bt.so tests/gpu/tools/segv_bt.c -ldl || exit 2
: >"$R/runs.txt"
rm -rf /tmp/plfailed && mkdir -p /tmp/plfailed || exit 2
slot() { # slot N BUILD GPU CPU
	local n=$1 b=$2 g=$3 c=$4 i=0 d rc
	while [ "$(date +%s)" -lt $((END - 25)) ]; do
		d=/tmp/plrun/$n.$i; rm -rf "$d"; mkdir -p "$d"
		printf '[profile]\nenabled = true\noutput = %s/trace\n[schedule]\nskip_first = 0\nwait = 20\nwarmup = 1\nactive = 20\nrepeat = 0\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n' "$d" >"$d/p.ini"
		CUDA_VISIBLE_DEVICES=$g STEPPROF_CONFIG=$d/p.ini STEPPROF_VERBOSE=1 \
			LD_PRELOAD="/tmp/pl$b/libstepprof-nomalloc.so /tmp/plnew/segv_bt.so" \
			timeout 60 taskset -c "$c" python3 bench/outside.py worker add --steps 200 >"$d/out" 2>"$d/err"
		rc=$?
		echo "$b slot $n run $i rc $rc steps $(grep -c '^STEP' "$d/out") t $(($(date +%s) - T0))" >>"$R/runs.txt"
		if [ $rc -ne 0 ]; then mkdir -p "/tmp/plfailed/$n.$i" && cp "$d/err" "/tmp/plfailed/$n.$i/"; fi
		rm -rf "$d"; i=$((i + 1))
	done
}
ngpu=$(nvidia-smi -L | grep -c '^GPU'); n=0
for ((g = 0; g < ngpu; g++)); do for k in 0 1 2; do
	b=new; [ -n "$OLD" ] && [ $((n % 2)) = 1 ] && b=old
	slot $n $b $g $((4 + n * 4)) & n=$((n + 1))
done; done
wait
for b in new old; do
	t=$(grep -c "^$b " "$R/runs.txt"); [ "$t" = 0 ] && continue
	echo "$b: $t runs, $(grep "^$b " "$R/runs.txt" | grep -vc ' rc 0 ') died or hung"
done
grep -v ' rc 0 ' "$R/runs.txt"
for f in /tmp/plfailed/*/err; do
	[ -f "$f" ] || continue
	echo "== $f"; grep -E '^segv_bt|corrupt|fastbin|double free' "$f" | head -24
	grep '^stepprof' "$f" | grep -v begins | tail -6
done | cut -c1-250
tar czf "$R/failed.tgz" -C /tmp plfailed
echo "($(($(date +%s) - T0)) s)"
! grep '^new ' "$R/runs.txt" | grep -vq ' rc 0 '
