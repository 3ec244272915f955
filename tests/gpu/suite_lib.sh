# SPDX-License-Identifier: MIT
# suite_lib.sh - what tests/gpu/run.sh and run-ddp.sh share, sourced by both: the helpers tests
# call (die, need, show) and the runner (run_suite NAME...), which runs each test t_<name> in
# its own directory $OUT/<name> with its log in test.log, prints PASS/FAIL with the log's tail,
# and ends with "N passed, N failed". Needs OUT and ONLY set by the sourcing script. REPEAT=N
# runs each test N times (a flaky test's hunt; runs after the first in $OUT/<name>.<k>), except
# tests listed in ONCE (those that build what later tests use).

die() { echo "FAILED: $*"; exit 1; }
need() { [ -e "$1" ] || die "missing $1 (made by test $2: run it first)"; }
show() { for f in "$@"; do [ -s "$f" ] && { echo "--- tail $f"; tail -n 30 "$f"; }; done; return 0; }

# run_suite NAME...: runs t_<NAME> (dashes as underscores) for each NAME matching $ONLY; returns
# 0 only if all pass.
run_suite() {
	local name dir start rc pass=0 fail=0 failed=()
	for name in "$@"; do
		[ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]] && continue
		local k times=${REPEAT:-1}
		[[ " ${ONCE:-} " == *" $name "* ]] && times=1
		for ((k = 1; k <= times; k++)); do
			dir=$OUT/$name
			[ "$k" -gt 1 ] && dir=$OUT/$name.$k
			mkdir -p "$dir"
			start=$SECONDS
			(cd "$dir" && set -o pipefail && "t_${name//-/_}") >"$dir/test.log" 2>&1
			rc=$?
			if [ $rc -eq 0 ]; then
				pass=$((pass + 1))
				echo "PASS $name ($((SECONDS - start)) s)"
			else
				fail=$((fail + 1))
				failed+=("$name")
				echo "FAIL $name ($((SECONDS - start)) s), log $dir/test.log:"
				tail -n 60 "$dir/test.log" | sed 's/^/    /'
			fi
		done
	done
	[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
