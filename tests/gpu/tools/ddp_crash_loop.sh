#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ddp_crash_loop.sh [NPROC] [SECONDS] - on the GPU machine, from the repository root after `make dist`:
# runs 2-rank (NPROC) DDP jobs (tests/gpu/train_ddp.py under torchrun; api marker, one window, then
# the final detach) with tests/gpu/tools/segv_bt.c preloaded beside libstepprof until SECONDS (250)
# have passed or 3 crashed, and prints each crash's native backtrace and stepprof lines. Output in $OUT.
cd "$(dirname "$0")/../../.." || exit 2
NP=${1:-2} SECS=${2:-250}
R=${OUT:-/tmp/crash-loop}; mkdir -p "$R"; ROOT=$PWD; T0=$(date +%s)
B=/tmp/spb; rm -rf $B; mkdir -p $B; cp dist/stepprof/bin/stepprof dist/stepprof/lib/* $B/
gcc -O1 -g -shared -fPIC -o $B/segv_bt.so tests/gpu/tools/segv_bt.c -ldl || exit 1
W=/tmp/segv; mkdir -p $W; cd $W
printf '[profile]\nenabled = true\noutput = %s/trace\n[ranks]\nranks = all\n[schedule]\nskip_first = 10\nwait = 1\nwarmup = 1\nactive = 8\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n[activities]\nkernels = true\nruntime_api = true\ndriver_api = true\nnccl = true\n' "$W" > sp.ini
i=0; crashes=0
while [ $(( $(date +%s) - T0 )) -lt $SECS ] && [ $crashes -lt 3 ]; do
	i=$((i+1)); rm -rf trace
	timeout 60 env STEPPROF_CONFIG=$W/sp.ini STEPPROF_VERBOSE=1 LD_PRELOAD="$B/libstepprof.so $B/segv_bt.so" NCCL_NVLS_ENABLE=0 \
		torchrun --standalone --nproc_per_node $NP $ROOT/tests/gpu/train_ddp.py --steps 24 > out.$i 2> err.$i
	rc=$?
	echo "run $i rc $rc ($(( $(date +%s) - T0 )) s)"
	if [ $rc -ne 0 ]; then crashes=$((crashes+1)); cp err.$i $R/err.$i
		grep -a "segv_bt" err.$i | head -40
		grep -a "^stepprof" err.$i | grep -v begins | tail -12
	fi
done
echo "$crashes crashes in $i runs"
[ "$crashes" -eq 0 ]
