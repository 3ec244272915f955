#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trace_size.sh [BUILD_DIR [BEFORE_BUILD_DIR]] - on a GPU machine, from the repository root: bytes
# per kernel of real training programs' traces (the whole .sptrace ÷ its kernel records: API,
# NVTX, memory and step records and strings included), under the default configuration and with
# one long window (active 40 steps). Programs: karpathy/llm.c's train_gpt2cu (GPT-2 124M from
# -e d12, -b 4 -t 128, as bench/outside.sh runs it; only if built in .thirdparty/llm.c, see
# tests/gpu/corpus/README.md), nanoGPT's train.py (only if in .thirdparty/nanoGPT) and
# tests/gpu/mlp_train.py, 60 steps each. BUILD_DIR: a build folder or dist/stepprof (default).
# BEFORE_BUILD_DIR: another build (e.g. main's `make dist`, copied to dist-main/stepprof) run the
# same way, for the pair before and after a format change. Prints one line per run:
#   SIZE PROGRAM CONFIG BUILD: N kernels, B bytes, X bytes/kernel (format vV)
# Output in ${OUT:-/tmp}/trace_size (emptied first). Exit 0 when every run left a readable trace.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp}/trace_size
PY=${PY:-python3}
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
cd "$ROOT" || exit 2

# tools BUILD: sets LIB and SP for a build folder or dist/stepprof
tools() {
	LIB=$1/libstepprof.so
	[ -e "$LIB" ] || LIB=$1/lib/libstepprof.so
	SP=$1/stepprof
	[ -e "$SP" ] || SP=$1/bin/stepprof
	if [ ! -e "$LIB" ] || [ ! -x "$SP" ]; then
		echo "trace_size: no libstepprof.so and stepprof in $1 (run 'make dist')"
		exit 2
	fi
}

PROGS=("mlp|$PY tests/gpu/mlp_train.py --steps 60")
if [ -f .thirdparty/nanoGPT/train.py ]; then
	PROGS+=("nanogpt|$PY tests/gpu/corpus/nanogpt_run.py .thirdparty/nanoGPT --compile=False --max_iters=60 --eval_interval=1000 --eval_iters=5 --gradient_accumulation_steps=1")
else
	echo "trace_size: no .thirdparty/nanoGPT/train.py: nanoGPT left out"
fi
if [ -x .thirdparty/llm.c/train_gpt2cu ]; then
	D=/tmp/llmc-data
	[ -e "$D/train.bin" ] || "$PY" tests/gpu/corpus/llmc_data.py "$D" >/dev/null || exit 2
	PROGS+=("llmc|.thirdparty/llm.c/train_gpt2cu -i $D/train.bin -j $D/val.bin -e d12 -b 4 -t 128 -x 60 -v 1000000 -s 0 -h 0")
else
	echo "trace_size: no .thirdparty/llm.c/train_gpt2cu: llm.c left out"
fi

bad=0
# run BUILD_NAME BUILD: every program under both configurations
run() {
	tools "$2"
	for p in "${PROGS[@]}"; do
		local name=${p%%|*} cmd=${p#*|}
		for cfg in default long; do
			local d=$OUT/$1/$name-$cfg extra=()
			[ $cfg = long ] && extra=(STEPPROF_SCHEDULE_ACTIVE=40)
			mkdir -p "$d"
			# shellcheck disable=SC2086 # cmd is a command line
			env STEPPROF_PROFILE_OUTPUT="$d/trace" "${extra[@]}" LD_PRELOAD="$LIB" timeout 600 $cmd \
				>"$d/stdout" 2>"$d/stderr" </dev/null
			local files=("$d"/trace/*.sptrace) f k b v
			f=${files[0]}
			if [ ! -f "$f" ] || ! "$SP" dump "$f" >"$d/dump" 2>"$d/dump.err"; then
				echo "FAIL $name $cfg $1: no readable trace (see $d)"
				bad=1
				continue
			fi
			k=$(grep -c '^kernel ' "$d/dump")
			b=$(stat -c %s "$f")
			v=$(sed -n 's/^version: //p' "$d/dump")
			echo "SIZE $name $cfg $1: $k kernels, $b bytes, $(awk -v b="$b" -v k="$k" 'BEGIN { printf "%.2f", k ? b / k : 0 }') bytes/kernel (format v$v)"
		done
	done
}
run after "${1:-$ROOT/dist/stepprof}"
[ $# -ge 2 ] && run before "$2"
exit $bad
