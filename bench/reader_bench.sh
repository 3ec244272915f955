#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/reader_bench.sh BUILD_DIR [CMP_BUILD_DIR] - time and peak RSS of the trace readers
# (`report`, `steps`, `convert`, `memory`) on one window of RECORDS records, on the host (no GPU):
# gen_ddp writes a data-parallel trace of 10 steps in one window (a launch and a kernel per
# kernel, 2 records each); SIZES lists the record counts (default 1000000 10000000). With
# CMP_BUILD_DIR (e.g. a build of main), each command of BUILD_DIR is followed by that build's on
# the same trace. Prints one row per (records, command, build): wall s, user s, peak RSS MB and
# bytes of RSS per record. `make bench-host` runs it on the build.
set -eu
BUILD=$(cd "${1:?usage: bench/reader_bench.sh BUILD_DIR [CMP_BUILD_DIR]}" && pwd)
CMP=$([ -n "${2:-}" ] && cd "$2" && pwd || true)
OUT=${OUT:-/tmp/stepprof-reader-bench}
SIZES=${SIZES:-1000000 10000000}
for f in "$BUILD/stepprof" "$BUILD/tests/e2e/gen_ddp"; do
	[ -x "$f" ] || { echo "missing $f: run 'make all test-build' first"; exit 2; }
done
rm -rf "$OUT" && mkdir -p "$OUT" && cd "$OUT"
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-9s %-6s %8s %8s %9s %10s\n' records command build wall_s user_s rss_MB B/record
for n in $SIZES; do
	"$BUILD/tests/e2e/gen_ddp" big 1 1 10 $((n / 20)) 1 >/dev/null
	for c in report steps convert memory; do
		for b in "$BUILD" ${CMP:+"$CMP"}; do
			case $c in
			convert) args="convert big0.sptrace -o out.json.gz" ;;
			memory) args="memory big0.sptrace -o out.html" ;;
			*) args="$c big0.sptrace" ;;
			esac
			/usr/bin/time -f '%e %U %M' -o time.txt "$b/stepprof" $args >/dev/null 2>log.txt ||
				{ cat log.txt; exit 1; }
			read -r wall usr rss <time.txt
			printf '%-10s %-9s %-6s %8s %8s %9.0f %10.1f\n' "$n" "$c" "$([ "$b" = "$BUILD" ] && echo this || echo cmp)" \
				"$wall" "$usr" "$(echo "$rss / 1024" | bc -l)" "$(echo "$rss * 1024 / $n" | bc -l)"
		done
	done
	rm -f big0.sptrace out.json.gz out.html
done
