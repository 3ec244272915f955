#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trigger_crash_loop.sh [NPROC] [SECONDS] - on the GPU machine, from the repository root after `make dist`:
# the trigger test idle-ddp as a loop (tests/gpu/trigger.sh: a torchrun job of NPROC ranks with nothing
# scheduled, api marker, so parked from the start; `stepprof trigger --steps 5 --job` once every rank is
# ready; then stopped) with tests/gpu/tools/segv_bt.c preloaded beside libstepprof, until SECONDS (250)
# have passed or 3 jobs failed. Prints each failed job's native backtraces and stepprof lines; exit 1
# if any job failed (a crash, or a window not written). Output in $OUT.
cd "$(dirname "$0")/../../.." || exit 2
NP=${1:-2} SECS=${2:-250}
R=${OUT:-/tmp/trigger-loop}; mkdir -p "$R"; ROOT=$PWD; T0=$(date +%s)
B=/tmp/spb; rm -rf $B; mkdir -p $B; cp dist/stepprof/bin/stepprof dist/stepprof/lib/* $B/
gcc -O1 -g -shared -fPIC -o $B/segv_bt.so tests/gpu/tools/segv_bt.c -ldl || exit 1
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
export NCCL_NVLS_ENABLE=0
i=0 bad=0
while [ $(( $(date +%s) - T0 )) -lt $SECS ] && [ $bad -lt 3 ]; do
	i=$((i+1)); W=/tmp/trigloop/$i; rm -rf $W; mkdir -p $W
	printf '[profile]\noutput = %s/trace\n[ranks]\nranks = all\n[schedule]\nwait = 100000000\nwarmup = 1\nactive = 3\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n[ondemand]\npoll_ms = 200\n' "$W" >$W/sp.ini
	STEPPROF_CONFIG=$W/sp.ini STEPPROF_VERBOSE=1 LD_PRELOAD="$B/libstepprof.so $B/segv_bt.so" timeout 120 \
		torchrun --standalone --nproc_per_node $NP $ROOT/tests/gpu/trigger_train.py --stop $W/stop \
		--ready "$W/ready.{rank}" --ready-after 40 >$W/out 2>$W/err &
	job=$!
	for _ in $(seq 900); do [ "$(ls $W/ready.* 2>/dev/null | wc -l)" -ge $NP ] && break; sleep 0.1; done
	$B/stepprof trigger --steps 5 --wait --timeout 40 --job $W/trace >$W/trig 2>&1; trc=$?
	touch $W/stop; wait $job; rc=$?
	echo "run $i rc $rc trigger rc $trc ($(( $(date +%s) - T0 )) s)"
	if [ $rc -ne 0 ] || [ $trc -ne 0 ]; then bad=$((bad+1)); cp $W/err $R/err.$i; cp $W/trig $R/trig.$i
		grep -a "segv_bt" $W/err | head -40
		grep -a "^stepprof" $W/err | grep -v begins | tail -14
		cat $W/trig
	fi
done
echo "$bad failed jobs in $i"
[ "$bad" -eq 0 ]
