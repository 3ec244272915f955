#!/usr/bin/env bash
# Runs every host test: the cmocka unit binaries, then the end-to-end scripts tests/e2e/*.sh.
# Ends with one summary line "N passed, N failed" that CI reads. Exit status 0 only if all pass.
set -u
O=${1:-build}
export SP_BUILD=$(cd "$O" && pwd) SP_ROOT=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0 failed=()
for t in "$O"/tests/test_*; do
	[ -x "$t" ] || continue
	echo "== $(basename "$t")"
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$(basename "$t")"); fi
done
for t in "$SP_ROOT"/tests/e2e/*.sh; do
	[ -f "$t" ] || continue
	echo "== $(basename "$t")"
	if bash "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$(basename "$t")"); fi
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
