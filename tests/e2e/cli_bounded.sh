#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_bounded.sh - the trace readers never hold a window's records: on one window of 200 K and of
# 800 K records (gen_ddp, written in the order the collector writes: GPU records in batches of
# 8192, as CUPTI hands out 2 MB activity buffers; launches held by CUDA's queue; an allocation and
# a free per launch, 1000 alive), the
# peak RSS of report, report --by line --json, report --by op, steps, convert, diff and memory stays under 40 MB
# and grows by less than 8 MB from the small window to the large one (readers that held the window
# took 130-280 bytes a record: 100-220 MB at 800 K). The outputs of the large one are checked for
# the steps and allocations they hold. Exits non-zero on the first failure.
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "SKIP: cli_bounded.sh needs /usr/bin/time (GNU time) for the peak RSS"; exit 0; }
cd "$T"
export GEN_DDP_QUEUE=1024 GEN_DDP_BATCH=8192 GEN_DDP_ALLOCS=1000
"$B/tests/e2e/gen_ddp" s 1 1 10 5000 1 >/dev/null || fail "gen_ddp small"
"$B/tests/e2e/gen_ddp" l 1 1 10 20000 1 >/dev/null || fail "gen_ddp large"

# rss KB of the command (stdout to out.txt)
rss() {
	/usr/bin/time -f %M -o rss.txt "$B/stepprof" "$@" >out.txt 2>err.txt || fail "$*: $(cat err.txt)"
	cat rss.txt
}
for cmd in "report T" "report --by line --json T" "report --by op T" "steps T" "convert T -o T.json.gz" "diff s0.sptrace T" \
	"memory T -o T.html"; do
	small=$(rss ${cmd//T/s0.sptrace})
	large=$(rss ${cmd//T/l0.sptrace})
	echo "$cmd: ${small} KB at 200K records, ${large} KB at 800K"
	[ "$large" -lt 40960 ] || fail "$cmd: ${large} KB at 800 K records (bound 40 MB)"
	[ $((large - small)) -lt 8192 ] || fail "$cmd: grows from ${small} KB to ${large} KB with the window"
done
"$B/stepprof" steps l0.sptrace >st.txt || fail "steps"
[ "$(awk '$1 ~ /^[0-9]+$/' st.txt | wc -l)" -eq 10 ] || fail "steps rows: $(cat st.txt)"
grep -q '^Window 0: steps 10-19 (10 steps), .*, 200010 kernels' <("$B/stepprof" report l0.sptrace) || fail "report window line"
"$B/stepprof" memory l0.sptrace -o m.html >m.txt || fail "memory"
grep -q 'GPU 0 (NVIDIA H100 80GB HBM3): peak .*; 187500 allocations, 186563 frees in the window' m.txt || fail "memory: $(cat m.txt)"
grep -q 'alive at the peak: 938 allocations' m.txt || fail "memory at the peak: $(cat m.txt)"
echo "cli_bounded.sh: ok"
