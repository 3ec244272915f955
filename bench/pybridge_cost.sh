#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/pybridge_cost.sh BUILD_DIR - the host cost of the Python bridge's watches (no GPU): per
# optimizer step of torch's global post hook (kind = optimizer, and kind = auto once it took the
# optimizer steps), per GradScaler.update (its wrapper, kind = auto), per call of a python
# marker's function, between windows (the schedule's window never comes in the run), and per
# iteration of a pure-Python loop in a program without torch while the bridge polls (kind =
# auto: the GIL taken every 100 ms), against the same loop unprofiled, in separate processes
# interleaved over ROUNDS rounds (5) of N calls (100000; NPOLL loop iterations); the unprofiled
# runs against each other give the A/A spread. Runs on the stand-in torch (tests/e2e/pybridge)
# with the stand-in CUPTI, for each CPython given in PYTHONS (default: python3 on PATH), the cases
# in CASES ("MODE CONFIG,...", default all). Prints one line per case: the median ns per call of
# each configuration and the difference.
set -u
BUILD=$(cd "${1:?usage: bench/pybridge_cost.sh BUILD_DIR}" && pwd) || exit 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-5}
N=${N:-100000}
NPOLL=${NPOLL:-50000000} # a pure-Python loop's iterations: a few seconds, some 30 polls
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ini() { # ini KIND PATTERN: a configuration whose window never comes within the run
	printf '[profile]\noutput = %s/out\n[ranks]\nranks = all\n[schedule]\nwait = 1000000000\n' "$T"
	printf '[marker]\nkind = %s\n%s[cupti]\nlibrary = %s\n' "$1" "${2:+pattern = $2
}" "$BUILD/tests/e2e/libfakecupti.so"
}
ini optimizer "" >"$T/optimizer.ini"
ini auto "" >"$T/auto.ini"
ini python __main__:step_fn >"$T/call.ini"
one() { # one PY MODE CONFIG|none: ns per call
	local n=$N
	[ "$2" = poll ] && n=$NPOLL
	if [ "$3" = none ]; then
		PYTHONPATH="$ROOT/tests/e2e/pybridge" "$1" "$ROOT/bench/pybridge_cost.py" "$2" "$n"
	else
		STEPPROF_CONFIG="$T/$3.ini" PYTHONPATH="$ROOT/tests/e2e/pybridge" \
			LD_PRELOAD="$BUILD/libstepprof-nomalloc.so" "$1" "$ROOT/bench/pybridge_cost.py" "$2" "$n"
	fi | awk '/^ns_per_call/ { print $2 }'
}
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for py in ${PYTHONS:-python3}; do
	v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	IFS=, read -r -a cases <<<"${CASES:-opt optimizer,opt auto,scaler auto,call call,poll auto}"
	for c in "${cases[@]}"; do
		set -- $c
		a=() b=() p=()
		for r in $(seq "$ROUNDS"); do
			a+=("$(one "$py" "$1" none)")
			p+=("$(one "$py" "$1" "$2")")
			b+=("$(one "$py" "$1" none)")
		done
		ma=$(med "${a[@]}") mb=$(med "${b[@]}") mp=$(med "${p[@]}")
		awk -v v="$v" -v w="$1" -v k="$2" -v a="$ma" -v b="$mb" -v p="$mp" -v av="${a[*]}" -v pv="${p[*]}" 'BEGIN {
			base = (a + b) / 2
			what = w == "opt" ? "optimizer step" : w == "scaler" ? "GradScaler.update" : w == "poll" ? "pure-Python loop iteration, polled" : "python marker call"
			printf "CPython %s, %s (%s): unprofiled %.2f ns, profiled %.2f ns a call: %+.2f%% (%+.3f us); A/A %.2f%% (unprofiled %s; profiled %s)\n",
				v, what, k, base, p, (p - base) / base * 100, (p - base) / 1000, (a > b ? a - b : b - a) / base * 100, av, pv }'
	done
done
