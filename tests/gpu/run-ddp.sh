#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/run-ddp.sh BUILD_DIR - the 2-GPU suite (NCCL, memory): torchrun + DDP under stepprof.
# Needs 2 GPUs, CUDA at $CUDA_HOME, python3 with torch and torchrun. Each test prints PASS/FAIL;
# the last line is "N passed, N failed". Logs, dumps and JSON go to ${OUT:-/tmp/stepprof-ddp}/<test>/.
# ONLY=REGEX runs the tests whose names match; T=SECONDS is each command's timeout (240).
# NCCL_NVLS_ENABLE=0 is forced in every run (no NVLink multicast). docs/GPU-TESTS.md says what
# each test proves.
set -u
BUILD=$(cd "${1:?usage: tests/gpu/run-ddp.sh BUILD_DIR}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/gpu/suite_lib.sh
. "$HERE/suite_lib.sh"
OUT=${OUT:-/tmp/stepprof-ddp}
PY=${PYTHON:-python3}
T=${T:-240}
ONLY=${ONLY:-}
ddp_setup run-ddp.sh

DDP_STEPS=20
DDP_SCHED=8,1,1,3,1         # skip_first,wait,warmup,active,repeat: records 10-12
DDP_RECORDED=3

# ---- helpers (run inside each test's subshell; the test's directory is the cwd) ----

sched_args() {
	local sk wa wu ac rp
	IFS=, read -r sk wa wu ac rp <<<"$DDP_SCHED"
	echo "--skip-first $sk --wait $wa --warmup $wu --active $ac --repeat $rp"
}

# write_ini FILE OUTPUT KIND PATTERN RANKS: one configuration, validated by `stepprof check`.
write_ini() {
	local f=$1 out=$2 kind=$3 pat=$4 ranks=$5 sk wa wu ac rp
	IFS=, read -r sk wa wu ac rp <<<"$DDP_SCHED"
	{
		printf '[profile]\nenabled = true\noutput = %s\n[ranks]\nranks = %s\n' "$out" "$ranks"
		printf '[schedule]\nskip_first = %s\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n' \
			"$sk" "$wa" "$wu" "$ac" "$rp"
		printf '[marker]\nkind = %s\n' "$kind"
		[ -n "$pat" ] && printf 'pattern = %s\n' "$pat"
		printf '[activities]\nkernels = true\nruntime_api = true\ndriver_api = true\nnccl = true\n'
		printf 'device_memory = true\n'
	} >"$f"
	echo "--- $f"; cat "$f"
	"$SP" check "$f" >check.log 2>&1 || { cat check.log; die "stepprof check $f rejected the configuration"; }
}

# ddp_run [stepprof] ARGS...: torchrun of train_ddp.py (under stepprof with ./stepprof.ini when
# the first word is "stepprof"); stdout/stderr in ./stdout.log, ./stderr.log. Dies unless both
# ranks exit 0 and print their "ddp ok" line.
ddp_run() {
	local env=(env NCCL_NVLS_ENABLE=0) rc r
	if [ "$1" = stepprof ]; then
		env+=(STEPPROF_CONFIG="$PWD/stepprof.ini" LD_PRELOAD="$LIB")
		shift
	fi
	echo "+ ${env[*]} ${LAUNCH[*]} $HERE/train_ddp.py --steps $DDP_STEPS $*"
	timeout "$T" "${env[@]}" "${LAUNCH[@]}" "$HERE/train_ddp.py" --steps "$DDP_STEPS" "$@" >stdout.log 2>stderr.log
	rc=$?
	grep -a '^stepprof:' stderr.log | sort | uniq -c | head -20 | sed 's/^/  [stderr] /'
	grep -a -e '^rank ' -e '^ddp ok' stdout.log | sed 's/^/  /'
	[ $rc -eq 0 ] || { show stdout.log stderr.log; die "torchrun exited $rc"; }
	for r in 0 1; do
		grep -q "^ddp ok rank=$r steps=$DDP_STEPS max_reserved_bytes=[0-9]" stdout.log ||
			{ show stdout.log stderr.log; die "no 'ddp ok rank=$r' line"; }
	done
}

# rank_traces: checks that ./trace holds exactly one trace per rank (rank0.*, rank1.*) and
# nothing else, and writes ./dump.rankR.txt and ./trace.rankR.json for each (checked against
# Perfetto's import rules and torch.profiler's layout: tests/e2e/check_chrome_json.py).
rank_traces() {
	local all r t n
	all=$(find trace -type f -not -path "trace/.stepprof/*" 2>/dev/null | sort) # .stepprof: on-demand control files
	echo "files under trace/:"; echo "${all:-  none}" | sed 's/^/  /'
	for r in 0 1; do
		n=$(printf '%s\n' "$all" | grep -c "/rank$r\.[^/]*\.sptrace\$")
		[ "$n" -eq 1 ] || die "expected one rank$r.*.sptrace, found $n"
	done
	[ "$(printf '%s\n' "$all" | grep -c .)" -eq 2 ] || die "trace/ holds files other than the two rank traces"
	for r in 0 1; do
		t=$(printf '%s\n' "$all" | grep "/rank$r\.")
		"$SP" dump "$t" >"dump.rank$r.txt" 2>dump.err || { cat dump.err; die "stepprof dump $t failed"; }
		"$SP" convert "$t" -o "trace.rank$r.json" --merge >convert.log 2>&1 ||
			{ cat convert.log; die "stepprof convert $t failed"; }
		"$PY" "$HERE/../e2e/check_chrome_json.py" "trace.rank$r.json" --perfetto --kineto --rank "$r" --devices ||
			die "trace.rank$r.json breaks Perfetto's import rules or torch.profiler's layout"
		"$PY" "$HERE/dumputil.py" summary "dump.rank$r.txt" | head -3
		grep -q "^rank: $r\$" "dump.rank$r.txt" || die "$t: header rank is not $r"
	done
}

# ---- tests ----
t_selftest() {
	"$PY" "$HERE/selftest_ddp_checks.py" || die "the checkers' self-test failed"
}

t_ddp_torch() {
	# shellcheck disable=SC2046
	ddp_run --torch-profiler "$PWD/torch" $(sched_args)
	local r
	for r in 0 1; do
		[ -s "torch/rank$r.json" ] || die "torch.profiler wrote no torch/rank$r.json"
		"$PY" "$HERE/traceutil.py" summary "torch/rank$r.json" >"summary.rank$r.log" 2>&1 ||
			{ cat "summary.rank$r.log"; die "torch/rank$r.json unreadable"; }
		head -1 "summary.rank$r.log"
		[ "$(grep -c '^step ' "summary.rank$r.log")" -eq "$DDP_RECORDED" ] ||
			die "rank $r: torch.profiler recorded $(grep -c '^step ' "summary.rank$r.log") steps, expected $DDP_RECORDED"
		grep -qi 'nccl' "summary.rank$r.log" || die "rank $r: torch.profiler saw no NCCL kernel"
	done
}

# rank1_only ARGS...: ddp_run with ranks = 1 and ARGS; exactly rank 1's trace must appear, with
# rank 1 of 2 in its header, the recorded steps and NCCL records.
rank1_only() {
	write_ini stepprof.ini "$PWD/trace" api 'cudaDeviceSynchronize*' 1
	ddp_run stepprof "$@"
	local all pid1 t
	all=$(find trace -mindepth 1 -not -path "trace/.stepprof*" 2>/dev/null | sort) # .stepprof: on-demand control files
	echo "under trace/:"; echo "${all:-  none}" | sed 's/^/  /'
	[ "$(printf '%s\n' "$all" | grep -c .)" -eq 1 ] || die "expected exactly one file under trace/ (rank 1's)"
	t=$all
	[[ $(basename "$t") == rank1.*.sptrace ]] || die "the trace is not rank1.*.sptrace"
	pid1=$(sed -n 's/^rank 1 pid \([0-9][0-9]*\) .*/\1/p' stdout.log)
	[ -n "$pid1" ] || die "no 'rank 1 pid N' line"
	[[ $(basename "$t") == *".$pid1.sptrace" ]] || die "the trace is not rank 1's process (pid $pid1)"
	"$SP" dump "$t" >dump.txt 2>dump.err || { cat dump.err; die "stepprof dump failed"; }
	grep -q '^rank: 1$' dump.txt && grep -q '^world_size: 2$' dump.txt || die "header is not rank 1 of 2"
	[ "$(grep -c '^step ' dump.txt)" -eq "$DDP_RECORDED" ] || die "$(grep -c '^step ' dump.txt) steps recorded, expected $DDP_RECORDED"
	[ "$(grep -c '^nccl ' dump.txt)" -gt 0 ] || die "rank 1's trace has no NCCL record"
}
t_ddp_rank1() { rank1_only; }

# ddp_nccl_test KIND PATTERN: both ranks recorded -> check_nccl against torch.profiler's traces
ddp_nccl_test() {
	local ref=$OUT/ddp-torch/torch
	need "$ref/rank1.json" ddp-torch
	write_ini stepprof.ini "$PWD/trace" "$1" "$2" all
	ddp_run stepprof --memory-json "$PWD/torch-mem.rank{rank}.json"
	rank_traces
	"$PY" "$HERE/check_nccl.py" --dump dump.rank0.txt --dump dump.rank1.txt \
		--json trace.rank0.json --json trace.rank1.json --torch "$ref/rank0.json" --torch "$ref/rank1.json" \
		--steps "$DDP_RECORDED" || die "check_nccl failed"
}
t_ddp_all() {
	ddp_nccl_test api 'cudaDeviceSynchronize*'
	# the cross-rank views on real traces: steps 10-12 on both ranks, every step in a row with
	# 2 ranks, a per-rank row each with NCCL time; diff of the two ranks lists the NCCL kernel
	local t0 t1
	t0=$(find trace -name 'rank0.*.sptrace') t1=$(find trace -name 'rank1.*.sptrace')
	"$SP" steps "$t0" "$t1" >steps.txt 2>steps.err || { cat steps.err; die "stepprof steps failed"; }
	cat steps.txt
	for s in 10 11 12; do
		grep -qE "^$s +2 " steps.txt || die "stepprof steps: no row for step $s with 2 ranks"
	done
	for r in 0 1; do
		grep -qE "^$r +3 +[0-9.]+[nmu]?s +[0-9.]+[nmu]?s +[0-9.]+[nmu]?s " steps.txt || die "stepprof steps: no row for rank $r"
	done
	"$SP" diff "$t0" "$t1" >diff.txt 2>diff.err || { cat diff.err; die "stepprof diff failed"; }
	head -8 diff.txt
	grep -q '^ncclDevKernel' diff.txt || die "stepprof diff: no NCCL kernel row"
	"$SP" report "$t0" >report.txt || die "stepprof report failed"
	grep -qE '^10 +0 ' report.txt || die "stepprof report: no per-step row for step 10"
}
t_ddp_auto() { ddp_nccl_test auto ''; }

# The rank from NCCL: the workers hide RANK/LOCAL_RANK/WORLD_SIZE before CUDA starts, so
# stepprof must take the rank from the communicator; ranks = 1 must give rank 1's trace only.
t_ddp_nccl_rank() { rank1_only --hide-rank-env; }

t_ddp_memory() {
	local src=$OUT/ddp-all r ok=1
	for r in 0 1; do
		need "$src/dump.rank$r.txt" ddp-all
		need "$src/torch-mem.rank$r.json" ddp-all
		echo "=== rank $r"
		"$PY" "$HERE/check_memory.py" "$src/dump.rank$r.txt" --memory-json "$src/torch-mem.rank$r.json" || ok=0
	done
	[ $ok -eq 1 ] || die "stepprof's device memory differs from torch's"
}

# the straggler diagnosis (tests/gpu/straggler.sh): host stall, compute, balanced, skewed clocks
# shellcheck source=tests/gpu/straggler.sh
. "$HERE/straggler.sh"
TESTS=(selftest ddp-torch ddp-rank1 ddp-all ddp-auto ddp-memory ddp-nccl-rank "${STRAGGLER_TESTS[@]}")
echo "stepprof 2-GPU suite: build $BUILD, output $OUT, launcher ${LAUNCH[*]}"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
run_suite "${TESTS[@]}"
