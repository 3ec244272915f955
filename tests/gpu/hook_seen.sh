#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# hook_seen.sh [BUILD_DIR] - on a GPU machine, from the repository root: do stepprof's launch hooks
# see every kernel launch ([marker] learn = hooks, issue 20)? Runs bench/outside.py's mlp worker
# (torch, cuBLAS GEMMs) and, if built, karpathy/llm.c's train_gpt2cu (static cudart, cuBLASLt) with
# kind = auto, learn = hooks and STEPPROF_VERBOSE=1, and prints for each: the lock, how the hooks
# caught launch functions beyond the table (preload/procaddr.c: "... is hooked: ..."), every
# lookup left unhooked ("... is not hooked: ..."), and any "did not see" warning or fallback to
# CUPTI learning. BUILD_DIR: a build folder, or dist/stepprof (the default, after 'make dist').
# Output in ${OUT:-/tmp/stepprof-hookseen}. Exit 0 when every program learned from the hooks,
# locked, and no launch went unseen; else 1.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/stepprof-hookseen}
PY=${PY:-python3}
STEPS=${STEPS:-60}
B=${1:-$ROOT/dist/stepprof}
LIB=$B/libstepprof-nomalloc.so
[ -e "$LIB" ] || LIB=$B/lib/libstepprof-nomalloc.so
[ -e "$LIB" ] || { echo "hook_seen: no libstepprof-nomalloc.so in $B (run 'make dist')"; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH

# one NAME COMMAND...: the program under stepprof, learning from the hooks; its verdict
bad=0
one() {
	local name=$1 d=$OUT/$1
	shift
	mkdir -p "$d"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 20\nwarmup = 2\nactive = 3\nrepeat = 2\n[marker]\nkind = auto\nlearn = hooks\n' \
		"$d/trace" >"$d/sp.ini"
	STEPPROF_CONFIG=$d/sp.ini STEPPROF_VERBOSE=1 LD_PRELOAD=$LIB "$@" >"$d/stdout" 2>"$d/stderr"
	local rc=$?
	echo "== $name (exit $rc; $d/stderr)"
	grep -E "learning from stepprof's hooks|locked on|is hooked:|is not hooked:|did not see|cannot learn from stepprof's hooks|learning with CUPTI all the same" \
		"$d/stderr" | sed 's/^/    /'
	if [ $rc != 0 ] || ! grep -q "learning from stepprof's hooks, not subscribed" "$d/stderr" ||
		! grep -q "locked on .* while learning from stepprof's hooks" "$d/stderr" ||
		grep -q "did not see\|cannot learn from stepprof's hooks" "$d/stderr"; then
		echo "FAIL $name: not learned from the hooks to the end (see above)"
		bad=1
	else
		echo "ok   $name: learned from the hooks, locked, no launch unseen"
	fi
}

one mlp "$PY" "$ROOT/bench/outside.py" worker mlp --steps "$STEPS"
LLMC=$ROOT/.thirdparty/llm.c
if [ -x "$LLMC/train_gpt2cu" ]; then
	D=/tmp/llmc-data
	[ -e "$D/train.bin" ] || "$PY" "$ROOT/tests/gpu/corpus/llmc_data.py" "$D" || exit 2
	one llmc "$LLMC/train_gpt2cu" -i "$D/train.bin" -j "$D/val.bin" -e d12 -b 4 -t 128 -x "$STEPS" -v 1000000 -s 0 -h 0
else
	echo "-- no $LLMC/train_gpt2cu (tests/gpu/corpus/README.md builds it): llm.c left out"
fi
exit $bad
