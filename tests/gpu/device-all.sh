#!/usr/bin/env bash
# device-all.sh - one device call: the single-GPU suite, the memory/stacks smoke and the malloc bench.
set -u
R=${OUT:-/tmp}
bash tests/gpu/device-suite.sh
grep -A25 "^FAIL" "$R/suite.log" | head -60
B=/tmp/spbuild
[ "${DEMO:-0}" = 1 ] && PATH=/usr/local/cuda/bin:$PATH scripts/demo.sh "$B" 2>&1 | tail -30
[ "${MALLOC:-1}" = 1 ] && OUT=/tmp/mb bash bench/malloc_bench.sh "$B" 2>&1 | tail -20 | tee "$R/malloc.log"
exit 0
