#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/run.sh BUILD_DIR - the GPU suite, on a machine with an NVIDIA GPU, CUDA at
# $CUDA_HOME (/usr/local/cuda) and python3 with torch. Each test prints PASS/FAIL; the last line
# is "N passed, N failed". Logs, traces and JSON go to ${OUT:-/tmp/stepprof-gpu}/<test>/.
# ONLY=REGEX runs the tests whose names match; T=SECONDS is each command's timeout (90); REPEAT=N
# runs each test but selftest and build N times (suite_lib.sh).
# docs/GPU-TESTS.md says what each test proves.
set -u
BUILD=$(cd "${1:?usage: tests/gpu/run.sh BUILD_DIR}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/gpu/suite_lib.sh
. "$HERE/suite_lib.sh"
OUT=${OUT:-/tmp/stepprof-gpu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
T=${T:-90}
ONLY=${ONLY:-}
LIB=$BUILD/libstepprof.so
SP=$BUILD/stepprof
for f in "$LIB" "$SP"; do [ -e "$f" ] || { echo "missing $f: run make first"; exit 2; }; done
# a clean environment: no inherited stepprof settings, preloads or CUPTI injections
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
rm -rf "$OUT" && mkdir -p "$OUT/bin" || exit 2

WL_ITERS=60
WL_SCHED=10,2,1,5,2         # skip_first,wait,warmup,active,repeat: records 13-17 and 21-25
WL_RECORDED=10
MLP_STEPS=16
MLP_SCHED=5,1,1,3,1         # records 7-9
MLP_RECORDED=3

# ---- helpers (run inside each test's subshell; the test's directory is the cwd) ----

# write_ini FILE OUTPUT KIND PATTERN EVERY SCHED: one stepprof configuration, validated by
# `stepprof check` (a rejected key fails the test here rather than leaving stepprof inert).
write_ini() {
	local f=$1 out=$2 kind=$3 pat=$4 every=$5 sk wa wu ac rp
	IFS=, read -r sk wa wu ac rp <<<"$6"
	{
		printf '[profile]\nenabled = true\noutput = %s\n' "$out"
		printf '[schedule]\nskip_first = %s\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n' \
			"$sk" "$wa" "$wu" "$ac" "$rp"
		printf '[marker]\nkind = %s\nevery = %s\n' "$kind" "$every"
		[ -n "$pat" ] && printf 'pattern = %s\n' "$pat"
		printf '[activities]\nkernels = true\nmemcpy = true\nmemset = true\n'
		printf 'runtime_api = true\ndriver_api = true\n'
	} >"$f"
	echo "--- $f"; cat "$f"
	"$SP" check "$f" >check.log 2>&1 || { cat check.log; die "stepprof check $f rejected the configuration"; }
}

# sp_run CMD...: runs CMD under stepprof (./stepprof.ini) with stdout/stderr in ./stdout.log and
# ./stderr.log; returns CMD's exit status. plain_run is the same without stepprof (./plain.*).
sp_run() {
	echo "+ LD_PRELOAD=$LIB STEPPROF_CONFIG=$PWD/stepprof.ini $*"
	STEPPROF_CONFIG=$PWD/stepprof.ini LD_PRELOAD=$LIB timeout "$T" "$@" >stdout.log 2>stderr.log
	local rc=$?
	grep -a '^stepprof:' stderr.log | head -20 | sed 's/^/  [stderr] /'
	return $rc
}
plain_run() {
	echo "+ $*"
	timeout "$T" "$@" >plain.stdout.log 2>plain.stderr.log
}
fail_run() { show stdout.log stderr.log; die "$2 exited $1"; }

# traces DIR: the .sptrace files under DIR, one per line.
traces() { find "$1" -name '*.sptrace' 2>/dev/null | sort; }

# convert_one: converts the single trace under ./trace to ./trace.json (dies otherwise) and checks
# it against Perfetto's import rules and torch.profiler's layout (tests/e2e/check_chrome_json.py).
convert_one() {
	local t n
	t=$(traces trace)
	n=$(printf '%s' "$t" | grep -c .)
	[ "$n" -eq 1 ] || { find trace -ls 2>/dev/null; show stderr.log; die "expected 1 trace file under $PWD/trace, found $n"; }
	echo "trace: $t ($(stat -c %s "$t") bytes)"
	"$SP" convert "$t" -o trace.json --merge >convert.log 2>&1 || { cat convert.log; die "stepprof convert failed"; }
	"$PY" "$HERE/../e2e/check_chrome_json.py" trace.json --perfetto --kineto --devices >check.log 2>&1 ||
		{ head -20 check.log; die "trace.json breaks Perfetto's import rules or torch.profiler's layout"; }
	"$PY" "$HERE/traceutil.py" summary trace.json >summary.log 2>&1 || { head -40 summary.log; die "trace.json unreadable"; }
	head -1 summary.log
}

# normalised FILE: the file with every number replaced by N (pids, times, sizes differ per run).
normalised() { sed -E 's/[0-9]+(\.[0-9]+)?/N/g' "$1"; }

# ---- tests ----
t_selftest() {
	"$PY" "$HERE/selftest_checks.py" || die "the checkers' self-test failed"
}

t_build() {
	local m
	for m in shared static; do
		echo "+ nvcc -cudart $m"
		"$CUDA_HOME/bin/nvcc" -O2 -arch=sm_90 -cudart "$m" "$HERE/workload.cu" -o "$OUT/bin/workload_$m" \
			-L"$CUDA_HOME/lib64/stubs" -lcuda -Xlinker -rpath="$CUDA_HOME/lib64" || die "nvcc failed ($m)"
	done
	for m in shared static; do
		"$OUT/bin/workload_$m" 3 || die "workload_$m does not run without stepprof"
	done
}

# workload_test BINARY KIND PATTERN [WORKLOAD ARGS...]: kind/pattern marker run -> check_workload
workload_test() {
	local bin=$OUT/bin/workload_$1 kind=$2 pat=$3
	shift 3
	need "$bin" build
	write_ini stepprof.ini "$PWD/trace" "$kind" "$pat" 1 "$WL_SCHED"
	sp_run "$bin" "$WL_ITERS" --expect expect.json "$@" || fail_run $? workload
	grep -q "^workload ok $WL_ITERS\$" stdout.log || die "no 'workload ok' line"
	convert_one
	"$PY" "$HERE/check_workload.py" trace.json expect.json --schedule "$WL_SCHED" ||
		{ show summary.log stderr.log; die "check_workload failed"; }
}
t_wl_kernel() { workload_test shared kernel step_marker; }
t_wl_kernel_static() { workload_test static kernel step_marker; }
t_wl_api() { workload_test shared api 'cudaDeviceSynchronize*'; }
# the runtime linked in statically (nvcc's default, as llm.c) with an api marker: its
# cudaDeviceSynchronize reaches stepprof only as the driver call it gets through cuGetProcAddress
# (preload/procaddr.c); once that is proven, stepprof parks between windows and each window still
# holds exactly its steps and kernels. --no-graph: a CUDA graph keeps stepprof subscribed all run
# (decide/life.c), so the workload makes none here
t_wl_park_static() {
	local WL_SCHED=10,8,1,3,3 # records 19-21, 31-33, 43-45; 8 steps between windows
	# 20 ms of host work a step: the workload's own steps (~0.1 ms) end before a window is written
	STEPPROF_VERBOSE=1 workload_test static api cudaDeviceSynchronize --host-us 20000 --no-graph
	grep -aE "detached from CUPTI in step [0-9]+ until the next window" stderr.log ||
		{ grep -a '^stepprof:' stderr.log | grep -aiE "hook|attach|driver|marker" | head; die "the static runtime did not park between windows"; }
}
t_wl_range() { workload_test shared profiler_range '' --profiler-range; }

t_wl_auto() {
	need "$OUT/bin/workload_shared" build
	write_ini stepprof.ini "$PWD/trace" auto '' 1 "$WL_SCHED"
	sp_run "$OUT/bin/workload_shared" "$WL_ITERS" --expect expect.json || fail_run $? workload
	convert_one
	"$PY" "$HERE/check_autosteps.py" trace.json --workload expect.json --steps "$WL_RECORDED" ||
		{ show summary.log stderr.log; die "check_autosteps failed"; }
}

# A run that ends before the schedule's first recorded step: the program's output and exit status
# are its own, and stepprof says on stderr why nothing was recorded (api and auto markers).
t_short_run() {
	need "$OUT/bin/workload_shared" build
	local kind
	for kind in api auto; do
		write_ini stepprof.ini "$PWD/trace-$kind" "$kind" "$([ $kind = api ] && echo 'cudaDeviceSynchronize*')" 1 "$WL_SCHED"
		sp_run "$OUT/bin/workload_shared" 8 || fail_run $? "workload ($kind marker)"
		grep -q '^workload ok' stdout.log || die "$kind: the workload's own output is missing"
		grep -q '^stepprof: no step recorded' stderr.log || { show stderr.log; die "$kind: no 'no step recorded' warning"; }
		[ "$kind" = auto ] || grep -q 'ended in step 7 and the schedule records from step 13' stderr.log ||
			{ show stderr.log; die "api: the warning does not name step 7 and step 13"; }
		grep -a '^stepprof: no step recorded' stderr.log | sed "s/^/  $kind: /"
	done
}

# nomalloc-lib: `stepprof run` preloads the library without malloc hooks when host_malloc is off,
# and it profiles as the full one does (check_workload); preloaded by hand with host_malloc on,
# that library says once that it cannot track host memory, and the program runs on unharmed.
t_nomalloc_lib() {
	need "$OUT/bin/workload_shared" build
	write_ini stepprof.ini "$PWD/trace" kernel step_marker 1 "$WL_SCHED"
	echo "+ $SP run --config stepprof.ini -- workload_shared $WL_ITERS"
	"$SP" run --config stepprof.ini -- sh -c 'echo "preload: $LD_PRELOAD" >preload.log; exec "$0" "$@"' \
		"$OUT/bin/workload_shared" "$WL_ITERS" --expect expect.json >stdout.log 2>stderr.log || fail_run $? workload
	cat preload.log
	grep -q 'libstepprof-nomalloc\.so' preload.log || die "stepprof run did not preload libstepprof-nomalloc.so"
	convert_one
	"$PY" "$HERE/check_workload.py" trace.json expect.json --schedule "$WL_SCHED" ||
		{ show summary.log stderr.log; die "check_workload failed with libstepprof-nomalloc.so"; }
	mkdir -p on && cd on || die "no directory"
	write_ini stepprof.ini "$PWD/trace" kernel step_marker 1 "$WL_SCHED"
	echo 'host_malloc = true' >>stepprof.ini
	LIB=$BUILD/libstepprof-nomalloc.so sp_run "$OUT/bin/workload_shared" 20 || fail_run $? "workload (host_malloc on)"
	grep -q '^workload ok 20$' stdout.log || die "no 'workload ok' line"
	[ "$(grep -ac 'host memory is not tracked' stderr.log)" = 1 ] || { show stderr.log; die "no single warning that host memory is not tracked"; }
}

mlp_sched_args() {
	local sk wa wu ac rp
	IFS=, read -r sk wa wu ac rp <<<"$MLP_SCHED"
	echo "--skip-first $sk --wait $wa --warmup $wu --active $ac --repeat $rp"
}

t_mlp_torch() {
	# shellcheck disable=SC2046
	plain_run "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" --torch-profiler "$PWD/torch.json" $(mlp_sched_args) ||
		{ show plain.stdout.log plain.stderr.log; die "mlp_train.py --torch-profiler failed"; }
	cat plain.stdout.log
	"$PY" "$HERE/traceutil.py" summary torch.json >summary.log 2>&1 || { cat summary.log; die "torch.json unreadable"; }
	head -1 summary.log
	[ "$(grep -c '^step ' summary.log)" -eq "$MLP_RECORDED" ] || die "torch.profiler recorded $(grep -c '^step ' summary.log) steps, expected $MLP_RECORDED"
}

t_mlp_auto() {
	local ref=$OUT/mlp-torch/torch.json
	need "$ref" mlp-torch
	write_ini stepprof.ini "$PWD/trace" auto '' 1 "$MLP_SCHED"
	sp_run "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" || fail_run $? mlp_train.py
	convert_one
	local ok=1
	"$PY" "$HERE/check_autosteps.py" trace.json --mlp --reference "$ref" --steps "$MLP_RECORDED" || ok=0
	"$PY" "$HERE/compare_torch.py" trace.json "$ref" || ok=0
	[ $ok -eq 1 ] || die "auto steps differ from torch.profiler's"
}

t_mlp_kernel() {
	local ref=$OUT/mlp-torch/torch.json every
	need "$ref" mlp-torch
	# the Adam(foreach) launches per step, as torch.profiler saw them: every N-th one is a boundary
	every=$("$PY" "$HERE/traceutil.py" count "$ref" '*multi_tensor_apply*') || die "no constant optimizer kernel count"
	[ "$every" -gt 0 ] || die "torch.profiler saw no multi_tensor_apply kernel"
	echo "multi_tensor_apply kernels per step: $every"
	write_ini stepprof.ini "$PWD/trace" kernel '*multi_tensor_apply*' "$every" "$MLP_SCHED"
	sp_run "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" || fail_run $? mlp_train.py
	convert_one
	"$PY" "$HERE/compare_torch.py" trace.json "$ref" || die "kernel-marker steps differ from torch.profiler's"
}

# launcher_test CMD...: CMD starts mlp_train.py in a child process. Under stepprof exactly one
# trace appears, in the worker's directory (output = trace/{pid}), none for the parent, no
# process warns that it recorded no step, and the output (numbers masked) and exit status equal
# a run without stepprof.
launcher_test() {
	local rc0 rc1 pid ppid t
	plain_run "$@"
	rc0=$?
	write_ini stepprof.ini "$PWD/trace/{pid}" auto '' 1 "$MLP_SCHED"
	sp_run "$@"
	rc1=$?
	[ $rc0 -eq 0 ] || { show plain.stderr.log; die "the run without stepprof exited $rc0"; }
	[ $rc1 -eq $rc0 ] || { show stderr.log; die "exit status $rc1 under stepprof, $rc0 without"; }
	diff <(normalised plain.stdout.log) <(normalised stdout.log) || die "stdout differs (numbers masked)"
	diff <(normalised plain.stderr.log) <(grep -av '^stepprof:' stderr.log | normalised /dev/stdin) >stderr.diff ||
		{ echo "note: stderr differs beyond stepprof's lines (not a failure):"; head -20 stderr.diff; }
	read -r pid ppid < <(sed -n 's/.*pid \([0-9][0-9]*\) ppid \([0-9][0-9]*\).*/\1 \2/p' stdout.log)
	[ -n "${ppid:-}" ] || die "no 'pid N ppid M' line from mlp_train.py"
	echo "worker pid $pid, parent $ppid; traces:"
	t=$(traces trace)
	echo "${t:-  none}"
	[ "$(printf '%s' "$t" | grep -c .)" -eq 1 ] || die "expected exactly one trace (the worker's)"
	[ "$(basename "$(dirname "$t")")" = "$pid" ] || die "the trace is not in trace/$pid (the worker)"
	[ ! -e "trace/$ppid" ] || die "the parent (pid $ppid) left trace/$ppid"
	# the worker records, and a launcher that only counts devices has nothing to say at exit
	! grep -a '^stepprof: no step recorded' stderr.log || die "a 'no step recorded' warning (the launcher's?)"
}
t_torchrun() {
	local launcher=(torchrun)
	command -v torchrun >/dev/null || launcher=("$PY" -m torch.distributed.run)
	launcher_test "${launcher[@]}" --standalone --nproc_per_node 1 "$HERE/mlp_train.py" --steps 12
}
t_bash_c() {
	# "; exit" keeps bash a separate parent process (a lone command would be exec'd)
	launcher_test bash -c "$PY $HERE/mlp_train.py --steps 12; exit \$?"
}

t_coexist() {
	write_ini stepprof.ini "$PWD/trace" auto '' 1 "$MLP_SCHED"
	# shellcheck disable=SC2046
	sp_run "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" --torch-profiler-coexist $(mlp_sched_args)
	local rc=$?
	show stdout.log
	[ $rc -eq 0 ] || { show stderr.log; die "exited $rc next to torch.profiler"; }
	grep -q '^mlp ok' stdout.log || die "no 'mlp ok' line"
	grep -ai 'cupti' stderr.log | grep -v '^stepprof:' | head -5 | sed 's/^/  [torch] /'
	grep -aiq '^stepprof:.*cupti' stderr.log || { show stderr.log; die "no 'stepprof:' warning naming CUPTI on stderr"; }
	echo "stepprof's own trace (information): $(traces trace | head -1)"
}

# mlp-memory: the device memory peak stepprof reports equals torch's max_memory_reserved within
# 1% (check_memory.py; other libraries' allocations are told apart by torch's segment addresses)
t_mlp_memory() {
	write_ini stepprof.ini "$PWD/trace" api 'cudaDeviceSynchronize*' 1 "$MLP_SCHED"
	sp_run env -u PYTORCH_CUDA_ALLOC_CONF "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" \
		--memory-json "$PWD/torch-mem.json" || fail_run $? mlp_train.py
	grep -a '^mlp ' stdout.log
	local t
	t=$(traces trace)
	[ "$(printf '%s' "$t" | grep -c .)" -eq 1 ] || die "expected 1 trace under $PWD/trace"
	"$SP" dump "$t" >dump.txt 2>dump.err || { cat dump.err; die "stepprof dump failed"; }
	"$PY" "$HERE/check_memory.py" dump.txt --memory-json torch-mem.json || die "check_memory failed"
}

# mlp-stacks: with stacks = true launch calls carry interned stack ids whose frames lie in the
# window's MODULE records (check_stacks.py on `stepprof dump`)
t_mlp_stacks() {
	write_ini stepprof.ini "$PWD/trace" api 'cudaDeviceSynchronize*' 1 "$MLP_SCHED"
	printf 'stacks = true\n' >>stepprof.ini
	"$SP" check stepprof.ini >check.log 2>&1 || { cat check.log; die "stacks = true rejected"; }
	sp_run "$PY" "$HERE/mlp_train.py" --steps "$MLP_STEPS" || fail_run $? mlp_train.py
	local t
	t=$(traces trace)
	[ "$(printf '%s' "$t" | grep -c .)" -eq 1 ] || die "expected 1 trace under $PWD/trace"
	"$SP" dump "$t" >dump.txt 2>dump.err || { cat dump.err; die "stepprof dump failed"; }
	"$PY" "$HERE/check_stacks.py" dump.txt || die "check_stacks failed"
	if "$SP" stacks "$t" --kind launch >stacks.txt 2>&1; then # information: the CLI's own view
		echo "stepprof stacks (head):"; head -20 stacks.txt
	fi
}

# nvtx: marker kind = nvtx on a loop whose iterations are NVTX ranges: steps 4-6 recorded, each
# holding exactly that iteration's three kernels
t_nvtx() {
	write_ini stepprof.ini "$PWD/trace" nvtx 'train_step' 1 "2,1,1,3,1"
	sp_run "$PY" "$HERE/nvtx_loop.py" 12 || fail_run $? nvtx_loop.py
	grep -a '^nvtx ok' stdout.log || die "nvtx_loop.py did not finish"
	convert_one
	"$PY" - trace.json "$HERE" <<'PY' || die "NVTX steps wrong"
import sys
sys.path.insert(0, sys.argv[2])
import traceutil
tr = traceutil.load(sys.argv[1])
steps = {s: [o for o in ops if o.cat == "kernel"] for s, ops in tr.steps.items()}
print("kernels per step:", {s: len(k) for s, k in sorted(steps.items())})
assert sorted(steps) == [4, 5, 6], sorted(steps)
assert all(len(k) == 3 for k in steps.values())
PY
}

# inert_test CMD...: a process that never initialises CUDA runs as without stepprof: same
# output and status, nothing on stderr from stepprof, no file or directory created.
inert_test() {
	local rc0 rc1
	plain_run "$@"
	rc0=$?
	write_ini stepprof.ini "$PWD/trace/{pid}" auto '' 1 "$MLP_SCHED"
	sp_run "$@"
	rc1=$?
	[ $rc0 -eq 0 ] || { show plain.stderr.log; die "the run without stepprof exited $rc0"; }
	[ $rc1 -eq $rc0 ] || die "exit status $rc1 under stepprof, $rc0 without"
	cmp -s plain.stdout.log stdout.log || { diff plain.stdout.log stdout.log; die "stdout differs"; }
	cmp -s plain.stderr.log stderr.log || { diff plain.stderr.log stderr.log; die "stderr differs"; }
	[ ! -e trace ] || { find trace; die "an inert process created files"; }
}
t_inert_true() { inert_test /bin/true; }
t_inert_python() { inert_test "$PY" -c 'print(1)'; }
t_inert_torch() { inert_test "$PY" -c 'import torch; print(torch.__version__)'; }

TESTS=(selftest build wl-kernel wl-kernel-static wl-api wl-park-static wl-range wl-auto mlp-torch mlp-auto mlp-kernel
	torchrun bash-c coexist inert-true inert-python inert-torch mlp-memory mlp-stacks nvtx short-run nomalloc-lib)
ONCE="selftest build"
echo "stepprof GPU suite: build $BUILD, output $OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
run_suite "${TESTS[@]}"
