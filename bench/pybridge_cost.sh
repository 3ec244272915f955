#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/pybridge_cost.sh BUILD_DIR - the host cost of the Python bridge's watches (no GPU): per
# optimizer step of torch's global post hook (kind = optimizer, and kind = auto once it took the
# optimizer steps), and per call of a python marker's function, between windows (the schedule's
# window never comes in the run), against the same loop unprofiled, in separate processes
# interleaved over ROUNDS rounds (5) of N calls (100000); the unprofiled runs against each other
# give the A/A spread. Runs on the stand-in torch (tests/e2e/pybridge) with the stand-in CUPTI,
# for each CPython given in PYTHONS (default: python3 on PATH). Prints one line per case: the
# median ns per call of each configuration and the difference in microseconds.
set -u
BUILD=$(cd "${1:?usage: bench/pybridge_cost.sh BUILD_DIR}" && pwd) || exit 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-5}
N=${N:-100000}
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
	if [ "$3" = none ]; then
		PYTHONPATH="$ROOT/tests/e2e/pybridge" "$1" "$ROOT/bench/pybridge_cost.py" "$2" "$N"
	else
		STEPPROF_CONFIG="$T/$3.ini" PYTHONPATH="$ROOT/tests/e2e/pybridge" \
			LD_PRELOAD="$BUILD/libstepprof-nomalloc.so" "$1" "$ROOT/bench/pybridge_cost.py" "$2" "$N"
	fi | awk '/^ns_per_call/ { print $2 }'
}
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for py in ${PYTHONS:-python3}; do
	v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	for c in "opt optimizer" "opt auto" "call call"; do
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
			printf "CPython %s, %s (%s): unprofiled %.0f ns, profiled %.0f ns a call: +%.2f us; A/A %.2f us (unprofiled %s; profiled %s)\n",
				v, w == "opt" ? "optimizer step" : "python marker call", k, base, p, (p - base) / 1000, (a > b ? a - b : b - a) / 1000, av, pv }'
	done
done
