#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# malloc_hooks.sh - the preload library announces its malloc hooks to the collector (item 4 of
# issue 17): with host_malloc = true, libstepprof.so says nothing about them, and
# libstepprof-nomalloc.so (no preload/malloc.o) warns exactly once that host memory is not
# tracked. No GPU: cupti_life_driver with the stand-in libfakecupti.so, as cupti_life.sh.
set -u
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
asan=$(ldd "$B/libstepprof.so" 2>/dev/null | awk '/libasan/ {print $3}')
[ -n "$asan" ] && export ASAN_OPTIONS=detect_leaks=0

# run LIB: stderr of a 4-step driver run with host_malloc on, in $T/LIB.err
run() {
	mkdir -p "$T/$1.out"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 1\nwarmup = 0\nactive = 1\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[activities]\nhost_malloc = true\n[cupti]\nlibrary = %s\n' \
		"$T/$1.out" "$B/tests/e2e/libfakecupti.so" >"$T/$1.ini"
	STEPPROF_CONFIG="$T/$1.ini" FAKE_CUPTI_LOG="$T/$1.log" LD_PRELOAD="${asan:+$asan }$B/$1" \
		timeout 60 "$B/tests/e2e/cupti_life_driver" 4 2000 >/dev/null 2>"$T/$1.err" ||
		{ echo "FAIL $1: driver exited $?: $(tail -3 "$T/$1.err")"; fail=1; }
}
run libstepprof.so
run libstepprof-nomalloc.so
n=$(grep -c "malloc hooks are not this process's allocator" "$T/libstepprof.so.err")
[ "$n" = 0 ] && echo "ok   libstepprof.so announces its malloc hooks (no warning)" ||
	{ echo "FAIL libstepprof.so warned $n times that it has no malloc hooks"; fail=1; }
n=$(grep -c "malloc hooks are not this process's allocator" "$T/libstepprof-nomalloc.so.err")
[ "$n" = 1 ] && echo "ok   libstepprof-nomalloc.so warns once that host memory is not tracked" ||
	{ echo "FAIL libstepprof-nomalloc.so warned $n times (want 1)"; sed 's/^/    /' "$T/libstepprof-nomalloc.so.err" | head; fail=1; }
exit $fail
