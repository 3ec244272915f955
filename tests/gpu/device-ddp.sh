#!/usr/bin/env bash
# device-ddp.sh - one 2-GPU device call: the dist laid flat, then tests/gpu/run-ddp.sh.
set -u
B=/tmp/spbuild; rm -rf "$B"; mkdir -p "$B"; cp dist/stepprof/bin/stepprof dist/stepprof/lib/* "$B/"
R=${OUT:-/tmp}; export OUT=/tmp/stepprof-ddp
nvidia-smi -L
set -o pipefail
bash tests/gpu/run-ddp.sh "$B" 2>&1 | tee "$R/ddp.log" | grep -E "^(PASS|FAIL|[0-9]+ passed)"
grep -A20 "^FAIL" "$R/ddp.log" | head -80
# the straggler tests' traces of host, compute and balanced, for tests/data/straggler/
. tests/gpu/straggler.sh && straggler_keep "$OUT" "$R"
for t in "$OUT"/ddp-all/trace/*.sptrace; do [ -f "$t" ] && "$B/stepprof" report "$t" | tail -25; done 2>/dev/null | head -60
exit 0
