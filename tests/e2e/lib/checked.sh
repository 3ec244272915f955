# SPDX-License-Identifier: MIT
# checked.sh - sourced by the random-input tests (tests/e2e/cli_random*.sh), not run by itself:
# fail, and run_checked, which holds a command to the exit codes it may use and to a silent
# sanitizer. Expects SEED (printed in failures) in the caller.

fail() { echo "FAIL: $*" >&2; exit 1; }

# run_checked NAME ALLOWED CMD...: CMD must exit with one of ALLOWED (e.g. "0 1") within 60 s, and
# stderr must hold no sanitizer report; stdout is left in out.txt, stderr in err.txt. Returns
# CMD's exit code.
run_checked() {
	local name=$1 allowed=$2 rc=0
	shift 2
	timeout 60 "$@" >out.txt 2>err.txt || rc=$?
	[[ " $allowed " == *" $rc "* ]] || fail "$name: exit $rc (seed $SEED): $* : $(head -c 400 err.txt)"
	! grep -qE 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer' err.txt ||
		fail "$name: sanitizer (seed $SEED): $* : $(grep -m3 -E 'Sanitizer|runtime error' err.txt)"
	return $rc
}
