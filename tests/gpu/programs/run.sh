#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh DIST_OR_BUILD MODE - the unseen-program suite (tests/gpu/programs/*.py: public training
# APIs used as their users do, each marking its true iterations with tests/gpu/corpus/truth.py) on
# the GPU machine, one device call per mode, from any folder. DIST_OR_BUILD: dist/stepprof (after
# `make dist`) or a build folder holding stepprof and libstepprof.so. Modes (docs/GPU-TESTS.md has
# the times and what PASS means):
#   smoke  every program once without stepprof, J at a time: exit status, iterations, wall time
#   steps  every program under the default configuration (`stepprof run`, no INI), under its truth
#          as an explicit marker recording every iteration, and under `[marker] kind = optimizer`
#          where the build accepts it (`stepprof check`) and the program trains with torch;
#          suite.py compare puts the recorded steps beside the truth's (why it aligns: its header)
#   prof   profiler_in_program.py alone and under stepprof (default, learn = cupti, the api truth
#          marker, kind = optimizer): torch.profiler's kernel/runtime/memcpy/memset counts equal,
#          stepprof's windows complete; 12 steps (stepprof records nothing) and 30 (overlapping)
#   bench  bench.py: HF Trainer's train_runtime and llm.c's ms per step under the default beside
#          unprofiled runs (two of them: the A/A noise), ROUNDS interleaved rounds, and the
#          in-process ratio (steps after the window against steps before it, same process)
# The last thing printed is the table (PASS/FAIL per program and check); $OUT gets MODE-table.txt
# and MODE-logs.tgz (every run's command, log, exit status, wall time, report.json; no traces),
# plus MODE-traces.tgz with KEEP_TRACES=1 and corpus.tgz (token streams) with RECORD=1 in steps.
# Settings: OUT (/tmp/stepprof-programs), WORK (/tmp/spprog), ONLY=REGEX (program names), J (runs
# at once: 4), T (seconds per run: 240), LIMIT (seconds for the whole mode: 570; no run starts
# after LIMIT - 60 and each run's timeout is cut to end by LIMIT), ROUNDS (bench: 3), PYTHON,
# DRY=1 (print the commands and fill the table with SKIP lines: no GPU, no stepprof run),
# PROG_PY (the Python that runs the programs: python3; tests/e2e/gpu_programs.sh puts a stand-in).
# .thirdparty/llm.c (tests/gpu/corpus/README.md): its train_gpt2cu is used if built, else built
# here with the README's command when its sources are there; without it llm.c is left out, saying so.
# Exit status: 0 when nothing failed, 1 otherwise, 2 on a usage error.
set -u
SRC=${1:-} MODE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
case "$MODE" in smoke | steps | prof | bench) ;; *)
	echo "usage: run.sh DIST_OR_BUILD smoke|steps|prof|bench (settings: see the header)" >&2
	exit 2
	;;
esac
DRY=${DRY:-0} PY=${PYTHON:-python3} J=${J:-4} T=${T:-240} LIMIT=${LIMIT:-570}
OUT=${OUT:-/tmp/stepprof-programs}
W=${WORK:-/tmp/spprog}/$MODE
R=$W/results.tsv
SUITE=$HERE/suite.py
SP=""
for c in "$SRC/bin/stepprof" "$SRC/stepprof"; do [ -x "$c" ] && SP=$(cd "$(dirname "$c")" && pwd)/stepprof && break; done
if [ -z "$SP" ]; then
	[ "$DRY" = 1 ] || { echo "run.sh: no stepprof in '$SRC' (make dist; or a build folder)" >&2; exit 2; }
	SP=stepprof
fi
mkdir -p "$OUT" || exit 2
rm -rf "$W" && mkdir -p "$W" || exit 2
: >"$R"
cd "$ROOT" || exit 2
# a clean environment: no inherited stepprof settings, preloads or injections; offline; NVLink
# multicast off as the machine asks
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
	HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
	NVSHMEM_DISABLE_NVLS=1
[ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "run.sh $MODE: stepprof $SP, work $W, J=$J, T=$T s, LIMIT=$LIMIT s${ONLY:+, ONLY=$ONLY}$([ "$DRY" = 1 ] && echo ", DRY")"

# llm.c: the built trainer, or a build from .thirdparty/llm.c's sources (in the background while
# the other programs run; the README's command and patch), and its synthetic tokens
L=$ROOT/.thirdparty/llm.c
llmc_build() {
	[ -x "$L/train_gpt2cu" ] && return 0
	[ -f "$L/train_gpt2.cu" ] || { echo "llm.c: no .thirdparty/llm.c (tests/gpu/corpus/README.md): left out"; return 1; }
	grep -q cudaMemLocationTypeHost "$L/llmc/cuda_utils.cuh" ||
		(cd "$L" && patch -p1 <"$ROOT/tests/gpu/corpus/llmc-cuda13.patch") >"$W/llmc-build.log" 2>&1
	make -C "$L" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90 >>"$W/llmc-build.log" 2>&1 ||
		{ echo "llm.c: build failed ($W/llmc-build.log): left out"; tail -3 "$W/llmc-build.log"; return 1; }
}
LLMC_PID=""
if [ "$MODE" != prof ] && { [ -z "${ONLY:-}" ] || [[ llmc =~ $ONLY ]]; }; then
	if [ "$DRY" = 1 ]; then
		echo "DRY [llmc] build .thirdparty/llm.c if needed; $PY tests/gpu/corpus/llmc_data.py $W/llmc"
	else
		{ llmc_build && "$PY" tests/gpu/corpus/llmc_data.py "$W/llmc" >/dev/null && touch "$W/llmc.ready" ||
			touch "$W/llmc.failed"; } &
		LLMC_PID=$!
	fi
fi
llmc_ready() {
	[ -n "$LLMC_PID" ] || return 0
	wait "$LLMC_PID" 2>/dev/null
	LLMC_PID=""
	if [ -e "$W/llmc.ready" ]; then
		export LLMC_BIN=$L/train_gpt2cu LLMC_DATA=$W/llmc
	else
		printf 'SKIP\tllmc\t%s\tnot built: no .thirdparty/llm.c, or its build failed (llmc-build.log)\n' "$MODE" >>"$R"
	fi
}

elapsed() { echo $SECONDS; }
# run_one DIR COMMAND...: the command with a timeout that ends by LIMIT; DIR gets cmd, log, rc, wall
run_one() {
	local d=$1
	shift
	mkdir -p "$d"
	printf '%q ' "$@" >"$d/cmd"
	echo >>"$d/cmd"
	if [ "$DRY" = 1 ]; then
		echo "DRY [${d#"$W"/}] $(cat "$d/cmd")"
		echo DRY >"$d/rc"
		return 0
	fi
	local left=$((LIMIT - SECONDS)) t=$T t0 t1
	[ "$left" -lt "$t" ] && t=$left
	[ "$t" -lt 5 ] && t=5
	t0=$(date +%s.%N)
	timeout -k 10 "$t" "$@" >"$d/log" 2>&1 </dev/null
	echo $? >"$d/rc"
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' >"$d/wall"
}
# pool NAME CHECK DIR COMMAND...: run_one in the background, at most J at once; nothing starts
# after LIMIT - 60 (a SKIP line says so)
pool() {
	local name=$1 check=$2
	shift 2
	[ "$DRY" = 1 ] && { run_one "$@"; return 0; }
	while [ "$(jobs -rp | wc -l)" -ge "$J" ]; do wait -n 2>/dev/null || true; done
	if [ "$SECONDS" -ge $((LIMIT - 60)) ]; then
		mkdir -p "$1" && echo SKIP >"$1/rc"
		printf 'SKIP\t%s\t%s\tnot started: LIMIT=%s s nearly spent\n' "$name" "$check" "$LIMIT" >>"$R"
		return 0
	fi
	run_one "$@" &
}
# the programs of programs.sh that ONLY selects, longest first (they start first in the pool)
. "$HERE/programs.sh"
programs() {
	suite_programs | while IFS='|' read -r name iters tags truth cmd; do
		[ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]] && continue
		echo "$name|$iters|$tags|$truth|$cmd"
	done
}
# every program, the others first and llm.c once its build is done (it builds meanwhile)
launch_all() { # FUNCTION: called with each program's fields
	local name iters tags truth cmd
	while IFS='|' read -r name iters tags truth cmd; do "$1" "$name" "$iters" "$tags" "$truth" "$cmd"; done < <(programs)
	llmc_ready
	while IFS='|' read -r name iters tags truth cmd; do
		[ "$name" = llmc ] && "$1" "$name" "$iters" "$tags" "$truth" "$cmd"
	done < <(programs)
	wait
}
argv_of() { # COMMAND DIR: the command's words with {dir} replaced
	local c=${1//\{dir\}/$2}
	read -r -a ARGV <<<"$c"
}
# true when this build knows `[marker] kind = optimizer`
OPT_OK=0
if [ "$DRY" = 1 ] || STEPPROF_MARKER_KIND=optimizer "$SP" check >/dev/null 2>&1; then OPT_OK=1; fi

finish() {
	local rc=0
	(cd "$W" && tar czf "$OUT/$MODE-logs.tgz" --exclude='*.sptrace' --exclude='*.tokens*' --exclude='kineto.json' \
		--exclude='llmc' . 2>/dev/null)
	if [ "${KEEP_TRACES:-0}" = 1 ]; then
		(cd "$W" && find . -name '*.sptrace' -path '*/default/*' -size -8M | tar czf "$OUT/$MODE-traces.tgz" -T - 2>/dev/null)
	fi
	echo "== $MODE: $((SECONDS)) s; logs in $W and $OUT/$MODE-logs.tgz"
	"$PY" "$SUITE" table "$R" | tee "$OUT/$MODE-table.txt"
	rc=${PIPESTATUS[0]}
	exit "$rc"
}

launch_smoke() { # NAME ITERS TAGS TRUTH COMMAND
	argv_of "$5" "$W/$1"
	pool "$1" smoke "$W/$1" "${ARGV[@]}"
}
launch_steps() { # NAME ITERS TAGS TRUTH COMMAND
	local name=$1 iters=$2 tags=$3 truth=$4 cmd=$5 kind=${4%%:*} pat=${4#*:} active=$(($2 - 2))
	[ $active -gt 150 ] && active=150
	argv_of "$cmd" "$W/$name/default"
	pool "$name" default "$W/$name/default" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$name/default/trace" -- "${ARGV[@]}"
	# the truth records every iteration but the first and the last (steps 1..ITERS-2, at most 150)
	argv_of "$cmd" "$W/$name/truth"
	pool "$name" truth "$W/$name/truth" "$SP" run -o "$W/$name/truth/trace" --set "marker.kind=$kind" \
		--set "marker.pattern=$pat" --set schedule.wait=0 --set schedule.warmup=1 \
		--set "schedule.active=$active" -- "${ARGV[@]}"
	if [[ $tags == *opt* ]] && [ "$OPT_OK" = 1 ]; then
		argv_of "$cmd" "$W/$name/optimizer"
		pool "$name" optimizer "$W/$name/optimizer" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$name/optimizer/trace" \
			--set marker.kind=optimizer -- "${ARGV[@]}"
	fi
	if [ "${RECORD:-0}" = 1 ]; then # the detector's tokens and the truth, for tests/data/corpus
		argv_of "$cmd" "$W/$name/record"
		pool "$name" record "$W/$name/record" env "STEPPROF_RECORD_TOKENS=$W/$name/record/$name.tokens" \
			"STEPPROF_RECORD_TRUTH=$truth" STEPPROF_VERBOSE=1 "$SP" run -o "$W/$name/record/trace" -- "${ARGV[@]}"
	fi
}

case "$MODE" in
smoke)
	launch_all launch_smoke
	while IFS='|' read -r name iters tags truth cmd; do
		[ "$DRY" = 1 ] && { printf 'SKIP\t%s\tsmoke\tDRY\n' "$name" >>"$R"; continue; }
		[ "$(cat "$W/$name/rc" 2>/dev/null)" = SKIP ] && continue
		"$PY" "$SUITE" smoke "$R" "$name" "$iters" "$W/$name"
	done < <(programs)
	;;
steps)
	launch_all launch_steps
	while IFS='|' read -r name iters tags truth cmd; do
		[ "$DRY" = 1 ] || [ "$(cat "$W/$name/truth/rc" 2>/dev/null)" = SKIP ] || "$PY" "$SUITE" report "$SP" "$W/$name/truth"
		for how in default optimizer; do
			[ -d "$W/$name/$how" ] || continue
			if [ "$DRY" = 1 ]; then printf 'SKIP\t%s\t%s\tDRY\n' "$name" "$how" >>"$R"; continue; fi
			[ "$(cat "$W/$name/$how/rc" 2>/dev/null)" = SKIP ] && continue
			"$PY" "$SUITE" report "$SP" "$W/$name/$how"
			"$PY" "$SUITE" compare "$R" "$name" "$how" "$W/$name/$how" "$W/$name/truth"
		done
		[[ $tags == *opt* ]] && [ "$OPT_OK" = 0 ] &&
			printf 'SKIP\t%s\toptimizer\tthis build refuses [marker] kind = optimizer (stepprof check)\n' "$name" >>"$R"
	done < <(programs)
	if [ "${RECORD:-0}" = 1 ] && [ "$DRY" != 1 ]; then
		for f in "$W"/*/record/*.tokens; do
			[ -e "$f" ] || continue
			n=$(basename "$f" .tokens) rd=$(dirname "$f")
			{ printf 'program = %s\ntruth = %s\n' "$n" "$(programs | awk -F'|' -v n="$n" '$1 == n { print $4 }')"
			  printf 'command = %s\nexit = %s\nseconds = %s\n' "$(cat "$rd/cmd")" "$(cat "$rd/rc")" "$(cat "$rd/wall")"
			  grep -a '^stepprof' "$rd/log" | grep -v begins | head -20; } >"${f%.tokens}.txt"
		done
		(cd "$W" && find . -path '*/record/*' \( -name '*.tokens' -o -name '*.txt' \) | tar czf "$OUT/corpus.tgz" -T -)
	fi
	;;
prof)
	P=tests/gpu/programs/profiler_in_program.py PP=${PROG_PY:-python3}
	[ -z "${ONLY:-}" ] || [[ profiler_in_program =~ $ONLY ]] || { echo "ONLY leaves nothing for prof"; finish; }
	for v in p12 p30; do
		a=(--steps 12)
		[ $v = p30 ] && a=(--steps 30 --skip-first 8)
		pool "profiler_in_program.$v" alone "$W/$v/alone" "$PP" "$P" --json "$W/$v/alone/kineto.json" "${a[@]}"
		pool "profiler_in_program.$v" default "$W/$v/default" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$v/default/trace" -- "$PP" "$P" --json "$W/$v/default/kineto.json" "${a[@]}"
		pool "profiler_in_program.$v" cupti "$W/$v/cupti" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$v/cupti/trace" --set marker.learn=cupti -- \
			"$PP" "$P" --json "$W/$v/cupti/kineto.json" "${a[@]}"
		pool "profiler_in_program.$v" api "$W/$v/api" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$v/api/trace" --set marker.kind=api \
			--set marker.pattern=cuGetErrorName -- "$PP" "$P" --json "$W/$v/api/kineto.json" "${a[@]}"
		[ "$OPT_OK" = 1 ] && pool "profiler_in_program.$v" optimizer "$W/$v/optimizer" env STEPPROF_VERBOSE=1 "$SP" run -o "$W/$v/optimizer/trace" \
			--set marker.kind=optimizer -- "$PP" "$P" --json "$W/$v/optimizer/kineto.json" "${a[@]}"
	done
	wait
	for v in p12 p30; do
		runs=()
		for c in default cupti api optimizer; do
			[ -d "$W/$v/$c" ] || continue
			[ "$DRY" = 1 ] || "$PY" "$SUITE" report "$SP" "$W/$v/$c"
			runs+=("$W/$v/$c")
		done
		if [ "$DRY" = 1 ]; then printf 'SKIP\tprofiler_in_program.%s\tprof\tDRY\n' "$v" >>"$R"; continue; fi
		"$PY" "$SUITE" prof "$R" "profiler_in_program.$v" "$W/$v/alone" "${runs[@]}"
	done
	[ "$OPT_OK" = 0 ] && printf 'SKIP\tprofiler_in_program\toptimizer\tthis build refuses [marker] kind = optimizer\n' >>"$R"
	;;
bench)
	b=(--sp "$SP" --work "$W" --results "$R" --rounds "${ROUNDS:-3}" --limit $((LIMIT - SECONDS - 30)))
	# llm.c runs after HF's rounds: bench.py waits for its build (llmc.ready or llmc.failed) then
	[ -n "$LLMC_PID" ] && b+=(--llmc "$L/train_gpt2cu" --llmc-data "$W/llmc" --llmc-ready "$W/llmc.ready")
	[ "$DRY" = 1 ] && b+=(--dry)
	[ -n "${ONLY:-}" ] && b+=(--only "$ONLY")
	"$PY" "$HERE/bench.py" "${b[@]}" | tee "$W/bench.txt"
	cp "$W/bench.md" "$OUT/bench.md" 2>/dev/null
	cp "$W/bench.json" "$OUT/bench.json" 2>/dev/null
	;;
esac
finish
