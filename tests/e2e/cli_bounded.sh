#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_bounded.sh - the trace readers never hold a window's records: on one window of 200 K and of
# 800 K records (gen_ddp, written in the order the collector writes: GPU records in CUPTI-buffer
# batches, launches held by CUDA's queue), the peak RSS of report, report --by line --json, steps,
# convert and diff stays under 40 MB and grows by less than 8 MB from the small window to the large
# one (readers that held the window took 130-230 bytes a record: 100-180 MB at 800 K). Outputs of
# the two sizes are checked for the steps they hold. Exits non-zero on the first failure.
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "SKIP: cli_bounded.sh needs /usr/bin/time (GNU time) for the peak RSS"; exit 0; }
cd "$T"
export GEN_DDP_QUEUE=1024 GEN_DDP_BATCH=32768
"$B/tests/e2e/gen_ddp" s 1 1 10 10000 1 >/dev/null || fail "gen_ddp small"
"$B/tests/e2e/gen_ddp" l 1 1 10 40000 1 >/dev/null || fail "gen_ddp large"

# rss KB of the command (stdout to out.txt)
rss() {
	/usr/bin/time -f %M -o rss.txt "$B/stepprof" "$@" >out.txt 2>err.txt || fail "$*: $(cat err.txt)"
	cat rss.txt
}
for cmd in "report T" "report --by line --json T" "steps T" "convert T -o T.json.gz" "diff s0.sptrace T"; do
	small=$(rss ${cmd//T/s0.sptrace})
	large=$(rss ${cmd//T/l0.sptrace})
	echo "$cmd: ${small} KB at 200K records, ${large} KB at 800K"
	[ "$large" -lt 40960 ] || fail "$cmd: ${large} KB at 800 K records (bound 40 MB)"
	[ $((large - small)) -lt 8192 ] || fail "$cmd: grows from ${small} KB to ${large} KB with the window"
done
"$B/stepprof" steps l0.sptrace >st.txt || fail "steps"
[ "$(awk '$1 ~ /^[0-9]+$/' st.txt | wc -l)" -eq 10 ] || fail "steps rows: $(cat st.txt)"
grep -q '^Window 0: steps 10-19 (10 steps), .*, 400010 kernels' <("$B/stepprof" report l0.sptrace) || fail "report window line"
echo "cli_bounded.sh: ok"
