#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/straggler.sh [BUILD_DIR] - the cross-rank diagnosis on 2 GPUs: torchrun + DDP
# (train_ddp.py) under stepprof, then `stepprof steps --json` on both ranks' traces must name
#   straggler-host      rank 1 sleeps 5 ms before each step          -> rank 1, cause host
#   straggler-compute   rank 1 trains on a 16x larger batch          -> rank 1, cause compute
#   straggler-balanced  both ranks alike                             -> no straggler (or a marginal one)
#   straggler-skew-a    as host, rank 0's wall clock +50 ms          -> rank 1, cause host
#   straggler-skew-b    as host, rank 1's wall clock -50 ms          -> rank 1, cause host
# (the skewed rank must be placed by its collectives, about 50 ms from its anchors).
# BUILD_DIR holds libstepprof.so and stepprof; without it, dist/stepprof (make dist) is laid flat
# in /tmp. Prints PASS/FAIL per test and "N passed, N failed". Logs under /tmp/stepprof-straggler;
# if OUT is set (the device machine's result folder), the traces of host, compute and balanced go
# to $OUT/straggler/<case>/rank<R>.sptrace (for tests/data/straggler/, read by
# tests/e2e/cli_straggler.sh) and the log to $OUT/straggler.log.
# Needs 2 GPUs, python3 with torch and torchrun. NCCL_NVLS_ENABLE=0 is forced.
# Sourced (by run-ddp.sh, whose suite then holds these tests too), it only defines the tests,
# STRAGGLER_TESTS and straggler_keep.
STRAGGLER_STEPS=24 # steps 12-19 recorded: 8 steps, about 20 DDP buckets (collectives) each
STRAGGLER_TESTS=(straggler-host straggler-compute straggler-balanced straggler-skew-a straggler-skew-b)

# run_case EXPECTED ARGS...: records both ranks (train_ddp.py ARGS), checks the verdict of
# `stepprof steps --json` ("R CAUSE" or "none"); leaves steps.json, steps.txt and trace/.
run_case() {
	local want=$1 rc got
	shift
	printf '[profile]\nenabled = true\noutput = %s/trace\n[ranks]\nranks = all\n' "$PWD" >stepprof.ini
	printf '[schedule]\nskip_first = 10\nwait = 1\nwarmup = 1\nactive = 8\nrepeat = 1\n' >>stepprof.ini
	printf "[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n" >>stepprof.ini
	printf '[activities]\nkernels = true\nruntime_api = true\ndriver_api = true\nnccl = true\n' >>stepprof.ini
	"$SP" check stepprof.ini >check.log 2>&1 || { cat check.log; die "stepprof check rejected stepprof.ini"; }
	echo "+ ${LAUNCH[*]} train_ddp.py --steps $STRAGGLER_STEPS $*"
	timeout "$T" env STEPPROF_CONFIG="$PWD/stepprof.ini" LD_PRELOAD="$LIB" NCCL_NVLS_ENABLE=0 \
		"${LAUNCH[@]}" "$HERE/train_ddp.py" --steps "$STRAGGLER_STEPS" "$@" >stdout.log 2>stderr.log
	rc=$?
	grep -a -e '^ddp ok' stdout.log | sed 's/^/  /'
	grep -a '^stepprof:' stderr.log | sort | uniq -c | head -10 | sed 's/^/  [stderr] /'
	[ $rc -eq 0 ] || { show stdout.log stderr.log; die "torchrun exited $rc"; }
	local t0 t1
	t0=$(find trace -name 'rank0.*.sptrace' | head -1) t1=$(find trace -name 'rank1.*.sptrace' | head -1)
	[ -n "$t0" ] && [ -n "$t1" ] || die "expected rank0.*.sptrace and rank1.*.sptrace under trace/"
	"$SP" steps "$t0" "$t1" >steps.txt 2>steps.err || { cat steps.err; die "stepprof steps failed"; }
	sed -n '/^Arrivals/,$p' steps.txt
	"$SP" steps --json "$t0" "$t1" >steps.json 2>>steps.err || { cat steps.err; die "stepprof steps --json failed"; }
	got=$("$PY" -c 'import json,sys; d=json.load(open("steps.json")); s=d["straggler"]; print("none" if s is None else "%d %s%s" % (s["rank"], s["cause"], " marginal" if d["straggler_detail"]["marginal"] else ""))')
	echo "verdict: $got (expected: $want)"
	# two ranks of one program differ by what their hosts' CPUs do (this machine's run at two
	# speeds): a balanced job may show a straggler near the bar, which the verdict must call marginal
	if [ "$want" = none ] && [[ "$got" == *" marginal" ]]; then
		echo "a marginal verdict on a balanced job: accepted (its wait is near the 10% bar)"
	else
		[ "$got" = "$want" ] || die "stepprof steps named '$got', expected '$want'"
	fi
	cp "$t0" rank0.sptrace && cp "$t1" rank1.sptrace
}

# skew_placed R: rank R's clock was placed by its collectives, 40-60 ms from its anchors
skew_placed() {
	"$PY" - "$1" <<'EOF' || die "rank $1's skewed clock was not corrected"
import json, sys
r = int(sys.argv[1])
t = [t for t in json.load(open("steps.json"))["traces"] if t["rank"] == r][0]["clock"]
print("rank %d clock: %s" % (r, t))
sys.exit(not (t["method"] == "collectives" and 40e6 < abs(t["offset_ns"]) < 60e6))
EOF
}

t_straggler_host() { run_case "1 host" --stall-rank 1 --stall-ms 5; }
t_straggler_compute() { run_case "1 compute" --batch-rank 1 --rank-batch 1024; }
t_straggler_balanced() { run_case "none"; }
t_straggler_skew_a() {
	run_case "1 host" --stall-rank 1 --stall-ms 5 --skew-rank 0 --skew-ns 50000000
	skew_placed 1 # rank 0 is the reference: rank 1 moves by the difference
}
t_straggler_skew_b() {
	run_case "1 host" --stall-rank 1 --stall-ms 5 --skew-rank 1 --skew-ns -50000000
	skew_placed 1
}

# straggler_keep SUITE_OUT DEST: copies the traces of host, compute and balanced from the suite's
# output to DEST/straggler/<case>/rank<R>.sptrace (what tests/data/straggler/ holds).
straggler_keep() {
	local c r f
	for c in host compute balanced; do
		for r in 0 1; do
			f=$1/straggler-$c/rank$r.sptrace
			[ -f "$f" ] && mkdir -p "$2/straggler/$c" && cp "$f" "$2/straggler/$c/rank$r.sptrace"
		done
	done
	return 0
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0 # sourced: the tests only

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RESULT=${OUT:-}
if [ $# -ge 1 ]; then
	BUILD=$(cd "$1" && pwd) || exit 2
else
	BUILD=/tmp/spbuild-straggler
	rm -rf "$BUILD" && mkdir -p "$BUILD" || exit 2
	cp "$ROOT"/dist/stepprof/bin/stepprof "$ROOT"/dist/stepprof/lib/* "$BUILD/" || { echo "no dist/: run make dist"; exit 2; }
fi
# shellcheck source=tests/gpu/suite_lib.sh
. "$HERE/suite_lib.sh"
OUT=/tmp/stepprof-straggler
ONLY=${ONLY:-}
PY=${PYTHON:-python3}
T=${T:-240}
ddp_setup straggler.sh
echo "stepprof straggler suite: build $BUILD, logs $OUT"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
run_suite "${STRAGGLER_TESTS[@]}" | tee "$OUT/summary.log"
rc=${PIPESTATUS[0]}
if [ -n "$RESULT" ]; then
	straggler_keep "$OUT" "$RESULT"
	cat "$OUT"/*/test.log >"$RESULT/straggler.log" 2>/dev/null
fi
exit "$rc"
