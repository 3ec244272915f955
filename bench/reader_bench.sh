#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/reader_bench.sh BUILD_DIR [CMP_BUILD_DIR] - time and peak RSS of the trace readers
# (`report`, `steps`, `convert`, `memory`) on one window of RECORDS records, on the host (no GPU):
# gen_ddp writes a data-parallel trace of 10 steps in one window: per kernel its launch, the
# kernel, and (MEM=1, the default) an allocation and a free (1000 blocks alive: `memory` has a
# timeline to draw); SIZES lists the record counts (default 1000000 10000000). ORDER sets the
# file order: `collector` (default) as the collector writes it (GPU records in batches of 32768, as
# CUPTI hands out its 8 MB activity buffers; launches held by a 1024-deep CUDA launch queue), `lag`
# gen_ddp's own (no launch queue: the GPU falls up to 46% of a step's records behind the CPU, the
# file as far out of time order). With CMP_BUILD_DIR (e.g. a build of main), each command of
# BUILD_DIR is followed by that build's on the same trace. Prints one row per (records, command,
# build): wall s, user s, peak RSS MB and bytes of RSS per record. `make bench-host` runs it on the
# build.
set -eu
BUILD=$(cd "${1:?usage: bench/reader_bench.sh BUILD_DIR [CMP_BUILD_DIR]}" && pwd)
CMP=$([ -n "${2:-}" ] && cd "$2" && pwd || true)
OUT=${OUT:-/tmp/stepprof-reader-bench}
SIZES=${SIZES:-1000000 10000000}
case ${ORDER:=collector} in
collector) export GEN_DDP_QUEUE=1024 GEN_DDP_BATCH=32768 ;;
lag) unset GEN_DDP_QUEUE GEN_DDP_BATCH ;;
*) echo "ORDER is collector or lag"; exit 2 ;;
esac
per=2 # records per kernel
if [ "${MEM:-1}" = 1 ]; then export GEN_DDP_ALLOCS=1000; per=4; else unset GEN_DDP_ALLOCS; fi
for f in "$BUILD/stepprof" "$BUILD/tests/e2e/gen_ddp"; do
	[ -x "$f" ] || { echo "missing $f: run 'make all test-build' first"; exit 2; }
done
rm -rf "$OUT" && mkdir -p "$OUT" && cd "$OUT"
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), file order: $ORDER, $per records per kernel"
printf '%-10s %-9s %-6s %8s %8s %9s %10s\n' records command build wall_s user_s rss_MB B/record
for n in $SIZES; do
	"$BUILD/tests/e2e/gen_ddp" big 1 1 10 $((n / 10 / per)) 1 >/dev/null
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
