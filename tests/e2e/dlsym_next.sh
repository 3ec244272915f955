#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dlsym_next.sh - the preload's dlsym (preload/procaddr.c) changes nothing for other callers:
# dlsym(RTLD_NEXT) from the program and from each of two libraries defining one symbol finds the
# definition after that caller (not after libstepprof), RTLD_DEFAULT and handles as before, a
# missing symbol still missing - with stepprof on and off, in the library with and without the
# malloc hooks (whose own resolution goes through the same dlsym).
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
fail=0
want=$(printf 'main next=a\na next=b\nb next=none\ndefault=a\nhandle b=b\ncuGetProcAddress_v2=none\nmissing=none')
plain=$("$B/tests/e2e/dlnext" 2>&1)
[ "$plain" = "$want" ] || { echo "FAIL the test program itself: $plain"; exit 1; }
for lib in "$PRE" "${PRE/-nomalloc/}"; do
	for on in 1 0; do
		got=$(STEPPROF_PROFILE_ENABLED=$on LD_PRELOAD="$lib" "$B/tests/e2e/dlnext" 2>&1)
		if [ "$got" = "$want" ]; then
			echo "ok   dlsym under $(basename "${lib##* }") (STEPPROF_PROFILE_ENABLED=$on): RTLD_NEXT still relative to its caller"
		else
			echo "FAIL dlsym under $lib (STEPPROF_PROFILE_ENABLED=$on):"
			diff <(echo "$want") <(echo "$got") | sed 's/^/    /'
			fail=1
		fi
	done
done
exit $fail
