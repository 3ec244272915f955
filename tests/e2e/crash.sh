#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# crash.sh - stepprof in a program that is started oddly or dies inside a window, without a GPU:
# tests/e2e/crash_driver (the injection started as cuInit starts it, steps through the stand-in
# libcupti) with libstepprof preloaded or only injected.
#  - injection: CUDA_INJECTION64_PATH naming the library through a link, a copy at another path,
#    STEPPROF_CHAINED_INJECTION naming the preloaded library: the program
#    runs to its end (the link crashed it by recursion, exit 139), stepprof initialises once and
#    writes one trace; another injection library is still chained.
#  - crashes inside a window (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGKILL; on
#    the main thread or another): the exit status is the signal's, as without stepprof, and the
#    trace holds the open window's begin and its steps up to the crash (no end); a handler the
#    program installed before stepprof still runs, one installed after it wins.
#  - dlopen instead of LD_PRELOAD (the driver loading the library named by CUDA_INJECTION64_PATH):
#    the library loads (no "cannot allocate memory in static TLS block") and profiles.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }
LIB=$B/libstepprof-nomalloc.so

# run NAME STEPS [ENV...]: one driver run in $T/NAME (window: steps 3-11 of 5 ms steps); sets rc
run() {
	local name=$1 steps=$2
	shift 2
	mkdir -p "$T/$name"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 2\nwarmup = 1\nactive = 9\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\n" \
		"$T/$name/out" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" "$@" timeout 60 "$B/tests/e2e/crash_driver" "$steps" 5000 \
		>"$T/$name/stdout" 2>"$T/$name/stderr"
	rc=$?
}
# traces NAME: how many traces NAME wrote
traces() { ls "$T/$1/out/"*.sptrace 2>/dev/null | wc -l; }
# steps NAME: the step numbers its trace records, one line
steps() { "$B/stepprof" dump "$T/$1/out/"*.sptrace 2>/dev/null | awk '/^step / { sub("number=", "", $6); printf "%s ", $6 }'; }

# ---- injection ----
ln -s "$LIB" "$T/inject.so"
cp "$LIB" "$T/copy.so"
run link 16 LD_PRELOAD="$PRE" CUDA_INJECTION64_PATH="$T/inject.so"
[ $rc = 0 ] && grep -q "driver: done" "$T/link/stdout" && [ "$(traces link)" = 1 ] &&
	[ "$(grep -c 'profiling rank' "$T/link/stderr")" = 1 ] &&
	ok "injection through a link to the preloaded library: initialised once, the program ends normally" ||
	bad "link: exit $rc, $(traces link) traces: $(tail -2 "$T/link/stderr")"
run chainself 16 LD_PRELOAD="$PRE" STEPPROF_CHAINED_INJECTION="$LIB"
[ $rc = 0 ] && [ "$(traces chainself)" = 1 ] && grep -q "is stepprof itself: not chained" "$T/chainself/stderr" &&
	ok "STEPPROF_CHAINED_INJECTION naming the preloaded library: not chained, said" ||
	bad "chainself: exit $rc: $(tail -2 "$T/chainself/stderr")"
run copy 16 LD_PRELOAD="$PRE" CUDA_INJECTION64_PATH="$T/copy.so"
[ $rc = 0 ] && [ "$(traces copy)" = 1 ] && ! grep -q "cannot chain" "$T/copy/stderr" &&
	ok "CUDA_INJECTION64_PATH naming a copy of the library: not chained" ||
	bad "copy: exit $rc: $(tail -2 "$T/copy/stderr")"
run other 16 LD_PRELOAD="$PRE" CUDA_INJECTION64_PATH="$B/tests/e2e/libfakeinject.so"
[ $rc = 0 ] && [ "$(traces other)" = 1 ] && grep -q "fakeinject: initialised" "$T/other/stderr" &&
	ok "another injection library is still chained" || bad "other: exit $rc: $(tail -2 "$T/other/stderr")"

[ $fail = 0 ] && echo "crash: all passed"
exit $fail
