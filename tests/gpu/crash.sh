#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/crash.sh [BUILD_DIR] - a PyTorch training loop that dies inside a window, on the GPU
# (tests/gpu/crash_train.py; window from step 6, the loop dies in iteration 20, so steps 6-18 are
# whole): for each way of dying (a real SIGSEGV, the same with Python's faulthandler on, abort(),
# SIGTERM, SIGINT, SIGKILL 300 iterations in) the exit status must be the one the same loop gets
# without stepprof, and the trace must hold the window's begin and its steps up to the crash:
#   segv, segv+faulthandler (stepprof's handler runs first, then faulthandler's), abort, term:
#     steps 6-18, no window end; term also its kernels (CUPTI flushed: a sound process); int: Python
#     turns SIGINT into KeyboardInterrupt, the program exits normally and its window ends at exit (6-19).
#   kill: no handler runs: at least steps 6-200 of the 6-298 recorded (the open window reaches the
#     file every 250 ms; 5 ms steps).
# Then the library loaded with dlopen only (CUDA_INJECTION64_PATH, no LD_PRELOAD): the loop runs
# to its end and the trace holds steps 6-35 with kernels. Without BUILD_DIR, dist/stepprof (`make
# dist`) is laid flat in /tmp/spcrash-build, so from the repository root on the GPU machine:
# bash tests/gpu/crash.sh. About 1 minute. Prints PASS/FAIL per case and "N passed, N failed"
# last; runs under /tmp/stepprof-crash/CASE/ (logs also under $OUT/crash/ when OUT is set).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
	BUILD=$(cd "$1" && pwd) || exit 2
else
	BUILD=/tmp/spcrash-build
	rm -rf "$BUILD" && mkdir -p "$BUILD" && cp "$HERE/../../dist/stepprof/bin/stepprof" "$HERE/../../dist/stepprof/lib/"* "$BUILD/" ||
		{ echo "no dist/stepprof: run 'make dist' first"; exit 2; }
fi
SP=$BUILD/stepprof
LIB=$BUILD/libstepprof.so
PY=${PYTHON:-python3}
KEEP=${OUT:-}
W=/tmp/stepprof-crash
rm -rf "$W" && mkdir -p "$W"
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH PYTHONFAULTHANDLER
ulimit -c 0
pass=0 fail=0
verdict() { # verdict NAME OK WHY
	if [ "$2" = 1 ]; then echo "PASS $1"; pass=$((pass + 1)); else echo "FAIL $1: $3"; fail=$((fail + 1)); fi
}

# steps DIR: "first-last kernels=K end=E" of the trace's window (first and last recorded steps, kernels
# in it, E = 1 if the window has its end)
steps() {
	"$SP" dump "$1"/trace/*.sptrace 2>/dev/null | awk '
		/^window_begin/ { w = 1 } /^window_end/ { e = 1 }
		/^step / && w { sub("number=", "", $6); if (f == "") f = $6; l = $6 }
		/^kernel / { k++ }
		END { printf "%s-%s kernels=%d end=%d", f, l, k, e }'
}

# run CASE HOW DIE_AT [ENV...]: the loop without stepprof (its exit status in ref) and under it (rc),
# in $W/CASE
run() {
	local c=$1 how=$2 at=$3 d=$W/$1
	shift 3
	mkdir -p "$d"
	printf '[profile]\noutput = %s/trace\n[ranks]\nranks = all\n[schedule]\nwait = 5\nwarmup = 1\nactive = 1000\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n' \
		"$d" >"$d/sp.ini"
	{ env "$@" "$PY" "$HERE/crash_train.py" --how "$how" --die-at "$at" >"$d/ref.log" 2>&1; ref=$?; } 2>/dev/null
	{ env "$@" STEPPROF_CONFIG="$d/sp.ini" LD_PRELOAD="$LIB" "$PY" "$HERE/crash_train.py" --how "$how" --die-at "$at" \
		>"$d/run.log" 2>&1; rc=$?; } 2>/dev/null
	got=$(steps "$d")
}

for c in segv:segv: fault:segv:PYTHONFAULTHANDLER=1 abort:abort: term:term: int:int:; do
	IFS=: read -r name how env <<<"$c"
	run "$name" "$how" 20 ${env:+"$env"}
	want="6-18 end=0"
	# Python's own SIGINT handler raises KeyboardInterrupt: the program ends normally (exit 1) and the
	# window is closed at exit, its last step the one the interrupt ended (nothing cut)
	[ "$how" = int ] && want="6-19 end=1"
	k=${got#*kernels=}
	k=${k%% *}
	ok=0
	[ "$rc" = "$ref" ] && [ "${got%% *} end=${got##*end=}" = "$want" ] && ok=1
	case $how in term | int) [ "$k" -lt 13 ] && ok=0 ;; esac # a step launches dozens of kernels
	verdict "$name: exit $rc (without stepprof $ref), window $got" $ok "want steps and end '$want'; $(tail -3 "$W/$name/run.log")"
done

run kill kill 300 # (--sleep-ms 5: 1.5 s of window)
last=${got%% *}
last=${last#*-}
verdict "kill: exit $rc (without stepprof $ref), window $got" \
	"$([ "$rc" = "$ref" ] && [[ "$got" == 6-* ]] && [ "${last:-0}" -ge 200 ] && echo 1)" "want steps 6 to at least 200"

d=$W/dlopen
mkdir -p "$d"
printf '[profile]\noutput = %s/trace\n[ranks]\nranks = all\n[schedule]\nwait = 5\nwarmup = 1\nactive = 30\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n' \
	"$d" >"$d/sp.ini"
STEPPROF_CONFIG=$d/sp.ini CUDA_INJECTION64_PATH=$LIB "$PY" "$HERE/crash_train.py" --how none --steps 40 >"$d/run.log" 2>&1
rc=$?
got=$(steps "$d")
k=${got#*kernels=}
k=${k%% *}
verdict "dlopen (CUDA_INJECTION64_PATH only): exit $rc, window $got" \
	"$([ "$rc" = 0 ] && [ "${got%% *}" = 6-35 ] && [ "$k" -ge 30 ] && ! grep -q "static TLS" "$d/run.log" && echo 1)" \
	"want exit 0, steps 6-35 with kernels; $(tail -3 "$d/run.log")"

if [ -n "$KEEP" ]; then
	mkdir -p "$KEEP/crash" && (cd "$W" && find . -name '*.log' -o -name '*.ini' | cpio -pdm "$KEEP/crash" 2>/dev/null)
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
