#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/open_flush.sh BUILD_DIR - what writing an open window's records to the file every 250 ms
# costs (collector/out/writer.c OPEN_FLUSH_NS: a SIGKILL then loses at most that much), on the host
# with the stand-in CUPTI (no GPU). Builds BUILD_DIR's sources twice more into $OUT (OPEN_FLUSH_NS =
# 50 ms, and "never": only full 256 KiB chunks, kicks and window ends reach the file, as before)
# and runs tests/e2e/crash_driver under each library and BUILD_DIR's own (250 ms), interleaved over
# ROUNDS rounds, all steps inside one window. Two loads: "slow" (5 ms steps, 3 launches each: the
# chunk fills slowly, so the timed writes are all there is) and "busy" (5 ms steps, 200 launches:
# chunks fill by size well within 250 ms). Prints per library and load the median over rounds of
# the process's CPU seconds (user + system, all threads), its wall seconds, the trace's bytes and
# records (a loaded machine drops ring events: bytes and CPU per record compare runs fairly).
# Settings: ROUNDS (5), STEPS (400), OUT (/tmp/stepprof-open-flush).
set -eu
BUILD=$(cd "${1:?usage: bench/open_flush.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/stepprof-open-flush}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-400}
for f in "$BUILD/libstepprof-nomalloc.so" "$BUILD/tests/e2e/crash_driver" "$BUILD/tests/e2e/libfakecupti.so"; do
	[ -e "$f" ] || { echo "missing $f: run 'make test-build' first"; exit 2; }
done
mkdir -p "$OUT" && rm -f "$OUT/raw.txt" # (the two builds are kept: make redoes only what changed)
for v in 50:50000000ull never:1000000000000000000ull; do
	make -s -C "$SRC" O="$OUT/build-${v%%:*}" OPT="-O2 -g -DOPEN_FLUSH_NS=${v#*:}" \
		"$OUT/build-${v%%:*}/libstepprof-nomalloc.so" >/dev/null
done
declare -A lib=([250ms]=$BUILD/libstepprof-nomalloc.so [50ms]=$OUT/build-50/libstepprof-nomalloc.so
	[never]=$OUT/build-never/libstepprof-nomalloc.so)
# one LIB LOAD STEP_US LAUNCHES: "cpu_s wall_s bytes" of one run
one() {
	local d=$OUT/run
	rm -rf "$d" && mkdir -p "$d"
	printf '[profile]\noutput = %s/out\n[ranks]\nranks = all\n[schedule]\nwait = 1\nwarmup = 1\nactive = 100000\nrepeat = 1\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\n[ondemand]\ntrigger = false\n' \
		"$d" "$BUILD/tests/e2e/libfakecupti.so" >"$d/sp.ini"
	STEPPROF_CONFIG=$d/sp.ini LD_PRELOAD=$1 LAUNCHES=$4 /usr/bin/time -f '%U %S %e' -o "$d/time" \
		"$BUILD/tests/e2e/crash_driver" "$STEPS" "$3" >/dev/null 2>&1
	local bytes recs
	bytes=$(stat -c %s "$d"/out/*.sptrace)
	recs=$("$BUILD/stepprof" dump "$d"/out/*.sptrace | grep -c '^[a-z_]* ')
	awk -v b="$bytes" -v n="$recs" '{ printf "%.3f %.3f %d %d\n", $1 + $2, $3, b, n }' "$d/time"
}
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $STEPS steps in one window, $ROUNDS rounds"
for load in slow:5000:3 busy:5000:200; do
	IFS=: read -r name us launches <<<"$load"
	for ((r = 1; r <= ROUNDS; r++)); do
		for v in never 250ms 50ms; do
			echo "$name $v $(one "${lib[$v]}" "$name" "$us" "$launches")" >>"$OUT/raw.txt"
		done
	done
done
printf '%-5s %-6s %8s %8s %10s %9s %11s %12s\n' load flush cpu_s wall_s bytes records "bytes/rec" "cpu_us/rec"
for load in slow busy; do
	for v in never 250ms 50ms; do
		awk -v l="$load" -v v="$v" '$1 == l && $2 == v { c[n] = $3; w[n] = $4; b[n] = $5; r[n] = $6; br[n] = $5 / $6; cr[n] = $3 * 1e6 / $6; n++ }
			function med(a, n,   i, j, t) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
				return a[int((n - 1) / 2)] }
			END { printf "%-5s %-6s %8.3f %8.3f %10d %9d %11.2f %12.2f\n", l, v, med(c, n), med(w, n), med(b, n), med(r, n), med(br, n), med(cr, n) }' "$OUT/raw.txt"
	done
done
