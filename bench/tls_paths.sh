#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tls_paths.sh NEW_BUILD OLD_BUILD [ROUNDS] - host, no GPU: what the library's thread-local variables
# cost on the paths that read them for every launch, as the paired difference of two builds (e.g.
# TLS descriptors, -mtls-dialect=gnu2, against initial-exec: docs/LIMITS.md, "dlopen").
# tests/e2e/cupti_life_driver (from NEW_BUILD, with its stand-in libcuda, libcudart and libcupti)
# makes 20000 launches a step, 30 steps, api marker:
#   trampoline  through stepprof's launch trampoline, subscribed all along, no window near (each
#               launch counted in the thread's slot: sp_inflight_own)
#   window      inside a window, each launch in a runtime call's callbacks (RT_LAUNCH=1: the
#               callbacks' per-thread state sp_thr, an event pushed to the thread's ring per call)
# Each round runs NEW and OLD alternately three times each on CPU 1 and prints the fastest median
# step (ms, steps 5 on) of each and their difference per launch: this host's speed changes between
# runs, and the fastest of three leaves the slow spells out. With CALLGRIND=1 instead: one run of
# 10 steps of 2000 launches and one of none per build and case under valgrind's callgrind, and the
# application thread's instructions per launch (the difference of the two; no noise). Each build
# dir holds libstepprof-nomalloc.so (`make`).
set -u
NEW=$(cd "${1:?usage: tls_paths.sh NEW_BUILD OLD_BUILD [ROUNDS]}" && pwd) OLD=$(cd "${2:?}" && pwd) R=${3:-5}
# setup CASE: the configuration ($T/sp.ini) and driver environment (env) of a case
setup() {
	local wait=100000
	env=(VIA_CUDART="$NEW/tests/e2e/libfakecudart.so" VIA_DRIVER="$NEW/tests/e2e/fakecuda/libcuda.so.1")
	[ "$1" = window ] && wait=2 env=(RT_LAUNCH=1)
	printf '[profile]\noutput = %s/out\n[ranks]\nranks = all\n[schedule]\nwait = %s\nwarmup = 1\nactive = 100\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\nlearn = cupti\n[cupti]\nlibrary = %s\ndetach_between = never\n[ondemand]\ntrigger = false\n' \
		"$T" "$wait" "$NEW/tests/e2e/libfakecupti.so" >"$T/sp.ini"
}
one() { # one BUILD CASE: the median step in ms
	T=$(mktemp -d) || exit 2
	setup "$2"
	env "${env[@]}" LAUNCHES=20000 FAKE_CUPTI_ONE_CORR=1 PRINT_STEPS=1 FAKE_CUPTI_LOG=/dev/null STEPPROF_CONFIG=$T/sp.ini \
		LD_PRELOAD=$1/libstepprof-nomalloc.so taskset -c 1 "$NEW/tests/e2e/cupti_life_driver" 30 0 2>/dev/null |
		awk '/^STEP/ && $2 >= 5 { print $3 }' | sort -n | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }'
	rm -rf "$T"
}
instr() { # instr BUILD CASE: the application thread's instructions per launch (callgrind)
	local n0 n1
	T=$(mktemp -d) || exit 2
	setup "$2"
	for l in 0 2000; do
		env "${env[@]}" LAUNCHES=$l FAKE_CUPTI_ONE_CORR=1 FAKE_CUPTI_LOG=/dev/null STEPPROF_CONFIG=$T/sp.ini \
			LD_PRELOAD=$1/libstepprof-nomalloc.so valgrind --tool=callgrind --separate-threads=yes \
			--callgrind-out-file="$T/cg.$l" "$NEW/tests/e2e/cupti_life_driver" 10 0 >/dev/null 2>&1
	done
	n0=$(callgrind_annotate "$T/cg.0-01" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	n1=$(callgrind_annotate "$T/cg.2000-01" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
	awk -v a="$n0" -v b="$n1" 'BEGIN { printf "%.1f", (b - a) / 20000 }'
	rm -rf "$T"
}
if [ "${CALLGRIND:-0}" = 1 ]; then
	for c in trampoline window; do
		n=$(instr "$NEW" $c) o=$(instr "$OLD" $c)
		echo "$c: new $n, old $o instructions a launch (application thread), difference $(awk -v a="$n" -v b="$o" 'BEGIN { printf "%+.1f", a - b }')"
	done
	exit 0
fi
for c in trampoline window; do
	for ((i = 1; i <= R; i++)); do
		n=999 o=999
		for k in 1 2 3; do
			n=$(awk -v a="$n" -v b="$(one "$NEW" $c)" 'BEGIN { print (b < a ? b : a) }')
			o=$(awk -v a="$o" -v b="$(one "$OLD" $c)" 'BEGIN { print (b < a ? b : a) }')
		done
		echo "$c round $i: new $n ms, old $o ms, difference $(awk -v a="$n" -v b="$o" 'BEGIN { printf "%+.3f ms (%+.1f ns a launch)", a - b, (a - b) * 1e6 / 20000 }')"
	done
done
