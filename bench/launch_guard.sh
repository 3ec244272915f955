#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# launch_guard.sh NEW_BUILD OLD_BUILD [ROUNDS] - host, no GPU: what a kernel launch through
# stepprof's launch trampoline costs while stepprof is subscribed (the launch drain's count, fourteenth
# session), as the paired difference of two builds. tests/e2e/cupti_life_driver (from NEW_BUILD, with
# its stand-in libcuda, libcudart and libcupti) launches 20000 kernels a step through the trampoline,
# 30 steps, api marker, no window near, `detach_between = never` (subscribed all along) or `auto`
# (parked before the first window: the fast path); each round runs NEW and OLD alternately three
# times each on CPU 1 and prints the fastest median step (ms, steps 5 on) of each and their
# difference: this host's speed changes between runs (by up to 1.8x), and the fastest of three
# leaves the slow spells out. Each build dir holds libstepprof-nomalloc.so (`make`).
set -u
NEW=$(cd "${1:?usage: launch_guard.sh NEW_BUILD OLD_BUILD [ROUNDS]}" && pwd) OLD=$(cd "${2:?}" && pwd) R=${3:-5}
one() { # one BUILD DETACH: the median step in ms
	local T
	T=$(mktemp -d) || exit 2
	printf '[profile]\noutput = %s/out\n[ranks]\nranks = all\n[schedule]\nwait = 100000\nwarmup = 1\nactive = 1\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\nlearn = cupti\n[cupti]\nlibrary = %s\ndetach_between = %s\n' \
		"$T" "$NEW/tests/e2e/libfakecupti.so" "$2" >"$T/sp.ini"
	VIA_CUDART=$NEW/tests/e2e/libfakecudart.so VIA_DRIVER=$NEW/tests/e2e/fakecuda/libcuda.so.1 LAUNCHES=20000 \
		PRINT_STEPS=1 FAKE_CUPTI_LOG=/dev/null STEPPROF_CONFIG=$T/sp.ini LD_PRELOAD=$1/libstepprof-nomalloc.so \
		taskset -c 1 "$NEW/tests/e2e/cupti_life_driver" 30 0 2>/dev/null |
		awk '/^STEP/ && $2 >= 5 { print $3 }' | sort -n | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }'
	rm -rf "$T"
}
for d in never auto; do
	for ((i = 1; i <= R; i++)); do
		n=999 o=999
		for k in 1 2 3; do
			n=$(awk -v a="$n" -v b="$(one "$NEW" $d)" 'BEGIN { print (b < a ? b : a) }')
			o=$(awk -v a="$o" -v b="$(one "$OLD" $d)" 'BEGIN { print (b < a ? b : a) }')
		done
		echo "$d round $i: new $n ms, old $o ms, difference $(awk -v a="$n" -v b="$o" 'BEGIN { printf "%+.3f ms (%+.1f ns a launch)", a - b, (a - b) * 1e6 / 20000 }')"
	done
done
