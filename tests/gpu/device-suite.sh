#!/usr/bin/env bash
# device-suite.sh - what one device call runs: the self-contained dist (no -dev packages there) laid
# flat as a build dir, then the GPU suite and, with BENCH=1, the benchmark. Short logs land in $OUT.
set -u
B=/tmp/spbuild; rm -rf "$B"; mkdir -p "$B"
cp dist/stepprof/bin/stepprof dist/stepprof/lib/* "$B/"
ldd "$B/stepprof" "$B/libstepprof.so" "$B/libstepprof-nomalloc.so" | grep -E "not found" && exit 1
R=${OUT:-/tmp}; export OUT=/tmp/stepprof-gpu
set -o pipefail
[ "${SUITE:-1}" = 1 ] && { ONLY=${ONLY:-} tests/gpu/run.sh "$B" 2>&1 | tee "$R/suite.log" | grep -E "^(PASS|FAIL|[0-9]+ passed)"; }
if [ "${BENCH:-0}" = 1 ]; then OUT=/tmp/stepprof-bench bench/run.sh "$B" 2>&1 | tee "$R/bench.log" | tail -40; cp /tmp/stepprof-bench/bench.md /tmp/stepprof-bench/bench.json "$R/" 2>/dev/null; fi
exit 0
