#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# crash.sh - stepprof in a program that is started oddly or dies inside a window, without a GPU:
# tests/e2e/crash_driver (the injection started as cuInit starts it, steps through the stand-in
# libcupti) with libstepprof preloaded or only injected.
#  - injection: CUDA_INJECTION64_PATH naming the library through a link, a copy at another path,
#    STEPPROF_CHAINED_INJECTION naming the preloaded library, the driver loading a copy: the program
#    runs to its end (the link crashed it by recursion, exit 139), stepprof initialises once and
#    writes one trace; another injection library is still chained.
#  - crashes inside a window (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGKILL; on
#    the main thread or another): the exit status is the signal's, as without stepprof, and the
#    trace holds the open window's begin and its steps up to the crash (no end; SIGKILL: up to 250 ms
#    before it); a handler the program installed before stepprof still runs (and when it lets the
#    program go on, the window is whole, written once), one installed after it wins.
#  - dlopen instead of LD_PRELOAD (the driver loading the library named by CUDA_INJECTION64_PATH):
#    the library loads (no "cannot allocate memory in static TLS block") and profiles; host_malloc
#    says that the malloc hooks are not the process's allocator then.
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

# run NAME STEPS [ENV...]: one driver run in $T/NAME (window: steps 3-11, or 3 to ACTIVE + 2, of 5 ms
# steps); sets rc
run() {
	local name=$1 steps=$2
	shift 2
	mkdir -p "$T/$name"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 2\nwarmup = 1\nactive = %s\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\n" \
		"$T/$name/out" "${ACTIVE:-9}" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	{ # (the shell's own line about a process killed by a signal: not shown)
		env STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" "$@" timeout 60 "$B/tests/e2e/crash_driver" "$steps" 5000 \
			>"$T/$name/stdout" 2>"$T/$name/stderr"
		rc=$?
	} 2>/dev/null
}
# traces NAME: how many traces NAME wrote
traces() { ls "$T/$1/out/"*.sptrace 2>/dev/null | wc -l; }
# records NAME: its trace's window records and step numbers in order, then its kernel count
records() {
	"$B/stepprof" dump "$T/$1/out/"*.sptrace 2>/dev/null |
		awk '/^step / { sub("number=", "", $6); printf "%s ", $6 } /^window_/ { printf "%s ", $1 } /^kernel / { k++ }
			END { printf "kernels=%d", k }'
}

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
run drvcopy 16 LD_PRELOAD="$PRE" DRIVER_INJECT="$T/copy.so"
[ $rc = 0 ] && [ "$(traces drvcopy)" = 1 ] && [ "$(grep -c 'profiling rank' "$T/drvcopy/stderr")" = 1 ] &&
	grep -q "handed to the first one" "$T/drvcopy/stderr" &&
	ok "the driver loading a copy of the preloaded library: the copy hands over, one collector, one trace" ||
	bad "drvcopy: exit $rc, $(traces drvcopy) traces: $(tail -2 "$T/drvcopy/stderr")"
run other 16 LD_PRELOAD="$PRE" CUDA_INJECTION64_PATH="$B/tests/e2e/libfakeinject.so"
[ $rc = 0 ] && [ "$(traces other)" = 1 ] && grep -q "fakeinject: initialised" "$T/other/stderr" &&
	ok "another injection library is still chained" || bad "other: exit $rc: $(tail -2 "$T/other/stderr")"

# ---- dlopen: the library named by CUDA_INJECTION64_PATH alone, loaded by the driver ----
for how in lib:$LIB link:$T/inject.so; do
	run "dl${how%%:*}" 16 CUDA_INJECTION64_PATH="${how#*:}"
	[ $rc = 0 ] && [ "$(records "dl${how%%:*}")" = "window_begin 3 4 5 6 7 8 9 10 11 window_end kernels=27" ] &&
		! grep -q "static TLS" "$T/dl${how%%:*}/stderr" ||
		bad "dlopen (${how%%:*}): exit $rc, records '$(records "dl${how%%:*}")': $(tail -2 "$T/dl${how%%:*}/stderr")"
done
[ $fail = 0 ] && ok "loaded with dlopen (the injection variable alone, the library or a link to it): it loads and profiles"
run dlmalloc 16 CUDA_INJECTION64_PATH="$B/libstepprof.so" STEPPROF_ACTIVITIES_HOST_MALLOC=1
[ $rc = 0 ] && [ "$(grep -c "malloc hooks are not this process's allocator" "$T/dlmalloc/stderr")" = 1 ] &&
	ok "loaded with dlopen and host_malloc = true: says host memory is not tracked" ||
	bad "dlmalloc: exit $rc: $(tail -2 "$T/dlmalloc/stderr")"

# ---- crashes inside a window ----
ulimit -c 0 # no core files
# each signal in step 7 (steps 3-5 whole, step 6 under way): the exit status is the signal's; the trace
# holds the window's begin and steps 3-5, no end; SIGTERM and SIGINT (a sound process) also the GPU
# records of steps 3-6
for c in segv:11 bus:7 fpe:8 ill:4 abort:6 term:15 int:2; do
	run "$c" 16 LD_PRELOAD="$PRE" CRASH="${c%:*}" CRASH_AT=7
	want="window_begin 3 4 5 kernels=0"
	case $c in term* | int*) want="window_begin 3 4 5 kernels=12" ;; esac
	[ $rc = $((128 + ${c#*:})) ] && [ "$(records "$c")" = "$want" ] ||
		bad "${c%:*}: exit $rc (want $((128 + ${c#*:}))), records '$(records "$c")' (want '$want'): $(tail -2 "$T/$c/stderr")"
done
[ $fail = 0 ] && ok "SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT in a window: the signal's exit status, the window's steps up to the crash"
run thread 16 LD_PRELOAD="$PRE" CRASH=segv CRASH_AT=7 CRASH_THREAD=1
[ $rc = 139 ] && [[ "$(records thread)" == "window_begin 3 4 5 "* ]] && [[ "$(records thread)" != *window_end* ]] &&
	ok "SIGSEGV on another thread: the same" || bad "thread: exit $rc, records '$(records thread)'"
run before 16 LD_PRELOAD="$PRE" CRASH=segv CRASH_AT=7 OWN=before
[ $rc = 139 ] && grep -q "driver: own handler" "$T/before/stderr" && [ "$(records before)" = "window_begin 3 4 5 kernels=0" ] &&
	ok "the program's handler installed first still runs, after the window is written" ||
	bad "before: exit $rc, records '$(records before)': $(tail -2 "$T/before/stderr")"
run survive 16 LD_PRELOAD="$PRE" CRASH=term CRASH_AT=7 OWN=survive
[ $rc = 0 ] && grep -q "driver: own handler" "$T/survive/stderr" && grep -q "driver: done" "$T/survive/stdout" &&
	[ "$(records survive)" = "window_begin 3 4 5 6 7 8 9 10 11 window_end kernels=27" ] &&
	ok "a SIGTERM the program's handler survives: the program goes on, its window is whole, written once" ||
	bad "survive: exit $rc, records '$(records survive)': $(tail -2 "$T/survive/stderr")"
run after 16 LD_PRELOAD="$PRE" CRASH=segv CRASH_AT=7 OWN=after
[ $rc = 42 ] && grep -q "driver: own handler" "$T/after/stderr" &&
	ok "a handler the program installs inside the window wins (its exit status 42)" ||
	bad "after: exit $rc: $(tail -2 "$T/after/stderr")"
# SIGKILL runs no handler: an open window reaches the file every 250 ms, so a kill 150 steps (at
# least 750 ms) into it leaves its begin and its first steps
ACTIVE=400 run kill 300 LD_PRELOAD="$PRE" CRASH=kill CRASH_AT=150
r=$(records kill)
n=$(echo "$r" | wc -w)
[ $rc = 137 ] && [[ "$r" == "window_begin 3 4 5 "* ]] && [[ "$r" != *window_end* ]] && [ "$n" -ge 30 ] &&
	ok "SIGKILL 150 steps into a window: its begin and $((n - 2)) steps are in the trace" ||
	bad "kill: exit $rc, records '$r'"

[ $fail = 0 ] && echo "crash: all passed"
exit $fail
