#!/usr/bin/env bash
# device-all.sh - one device call: the single-GPU suite, then optionally the demo (DEMO=1), the
# malloc bench (MALLOC=1, the default) and, on a machine with two GPUs, the DDP suite (DDP=1).
# Short logs land in $OUT. On a 2-GPU machine (kind nvidia-h100-x2) DDP=1 MALLOC=0 proves both
# suites in about five minutes of one call.
set -u
R=${OUT:-/tmp}
bash tests/gpu/device-suite.sh
grep -A25 "^FAIL" "$R/suite.log" | head -60
B=/tmp/spbuild
[ "${DEMO:-0}" = 1 ] && PATH=/usr/local/cuda/bin:$PATH scripts/demo.sh "$B" 2>&1 | tail -30
[ "${MALLOC:-1}" = 1 ] && OUT=/tmp/mb bash bench/malloc_bench.sh "$B" 2>&1 | tail -20 | tee "$R/malloc.log"
[ "${DDP:-0}" = 1 ] && OUT=$R bash tests/gpu/device-ddp.sh
exit 0
