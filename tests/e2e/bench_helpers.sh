#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_helpers.sh - the benchmark helpers that decide what a GPU number means, without a GPU:
# bench.py's paired inside/outside-window ratio (--cycle) picks the right steps and refuses too few,
# and the malloc mix's share of tracked blocks (MIX_LARGE_PERMILLE) is honoured and checked.
# Exits non-zero on failure.
set -euo pipefail
R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# in_out: 8 windows of 6 steps after 6 waiting ones and a warmup (skip_first 8), as stepprof numbers
# them; steps inside windows take 11 ms, the warmup step and the one after each window 30 ms (a
# save), all others 10 ms: the ratio must be 1.1, the edges left out
python3 - "$R/bench" <<'PY' || fail "bench.py in_out"
import sys
sys.path.insert(0, sys.argv[1])
import bench
skip, wait, active = 8, 6, 6
rec, i = set(), skip
for _ in range(bench.CYCLES):
    i += wait + 1
    rec.update(range(i, i + active))
    i += active
total = i + 2
times = [11.0 if k in rec else 30.0 if (k + 1 in rec and k not in rec) or (k - 1 in rec and k not in rec) else 10.0
         for k in range(total)]
r = bench.in_out(times, rec, skip)
assert abs(r["in_out"] - 1.1) < 1e-9 and r["in_ms"] == 11.0 and r["out_ms"] == 10.0, r
assert bench.in_out(times[:20], rec, skip) == {}, "a run with one window must give no ratio"
print("ok   in_out: 1.100 inside/outside, edges left out; too few steps refused")
PY

# the mix: per mille of blocks >= 64 KiB as asked; a bad value refused with exit 2
cat >"$T/mix.c" <<'C'
#include "malloc_mix.h"
int main(void)
{
	unsigned large = 0, n = 200000;
	mix_read_settings();
	for (unsigned i = 0; i < n; i++)
		large += pick_size() >= LARGE_MIN;
	printf("%u\n", (large * 10000 + n / 2) / n); /* per ten thousand */
	return 0;
}
C
gcc -std=gnu11 -O2 -Wall -Wno-unused-function -I"$R/bench" "$T/mix.c" -o "$T/mix" || fail "malloc_mix.h does not build"
# share in per ten thousand within 10% of what was asked (200,000 draws of a fixed sequence)
share() { local got; got=$(MIX_LARGE_PERMILLE=$1 "$T/mix"); [ "$got" -ge $(($2 * 9 / 10)) ] && [ "$got" -le $(($2 * 11 / 10)) ] ||
	fail "MIX_LARGE_PERMILLE='$1': $got per ten thousand, not about $2"; }
share "" 500
share 10 100
share 2 20
share 0 0
rc=0; MIX_LARGE_PERMILLE=1001 "$T/mix" >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "MIX_LARGE_PERMILLE=1001: exit $rc, not 2"
echo "ok   malloc mix: 50 per mille by default, 10, 2 and 0 as asked, 1001 refused"
