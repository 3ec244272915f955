#!/usr/bin/env bash
# Runs every host test: the cmocka unit binaries, then the end-to-end scripts tests/e2e/*.sh, each
# in a scratch directory of its own (nothing is written into the source tree). A script prints
# "skipped: WHAT (why)" for a part it cannot run here (an optional tool is absent: HTA, node), or
# exits 77 when it cannot run at all; each such line or exit counts as one skipped. Ends with one
# summary line "N skipped; N passed, N failed" (CI reads its end, "N passed, N failed"). Exit
# status 0 only if none failed.
set -u
O=${1:-build}
export SP_BUILD=$(cd "$O" && pwd) SP_ROOT=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0 skip=0 failed=() skipped=()
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
# run NAME CMD...: one test in a fresh directory, its output shown and scanned for skips
run() {
	local name=$1 dir rc n=0
	shift
	echo "== $name"
	dir=$(mktemp -d "$SCRATCH/$name.XXXXXX")
	(cd "$dir" && "$@") 2>&1 | tee "$dir.log"
	rc=${PIPESTATUS[0]}
	while IFS= read -r line; do
		n=$((n + 1))
		skip=$((skip + 1))
		skipped+=("$name: ${line#skipped: }")
	done < <(grep '^skipped: ' "$dir.log")
	rm -rf "$dir" "$dir.log"
	if [ "$rc" = 77 ]; then
		[ "$n" -gt 0 ] || { skip=$((skip + 1)); skipped+=("$name: (exit 77)"); }
	elif [ "$rc" = 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed+=("$name")
	fi
}
for t in "$SP_BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run "$(basename "$t")" "$t"
done
for t in "$SP_ROOT"/tests/e2e/*.sh; do
	[ -f "$t" ] || continue
	run "$(basename "$t")" bash "$t"
done
for s in "${skipped[@]}"; do echo "skipped: $s"; done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$skip skipped; $pass passed, $fail failed"
[ "$fail" -eq 0 ]
