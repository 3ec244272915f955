#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - `make fuzz`: runs the libFuzzer harnesses of tests/fuzz/ for SECONDS in all, one
# process at a time (one core: -jobs=1 -workers=1), each from its committed seed corpus plus the
# corpus grown by earlier runs (build/fuzz/corpus/NAME, kept), with the limits that `make test`
# holds the readers to: 10 s per input, 1 GiB of memory. The trace harness gets 5/6 of the time,
# the configuration harness the rest. A finding is written to build/fuzz/findings/NAME/ and ends
# the run with exit 1: reproduce it with `build/fuzz/fuzz_NAME FILE` (FUZZ_VERBOSE=1), fix it,
# and commit the file under tests/fuzz/regress/NAME/ (make test runs them all).
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS NAME...
set -u
O=$(cd "$1" && pwd) SECONDS_ALL=$2
shift 2
R=$(cd "$(dirname "$0")/../.." && pwd)
rc=0
for name in "$@"; do
	case $name in
	trace) share=5 ;;
	*) share=1 ;;
	esac
	total=0
	for n in "$@"; do case $n in trace) total=$((total + 5)) ;; *) total=$((total + 1)) ;; esac; done
	secs=$((SECONDS_ALL * share / total))
	[ "$secs" -ge 1 ] || secs=1
	corpus=$O/fuzz/corpus/$name findings=$O/fuzz/findings/$name logs=$O/fuzz/logs/$name
	mkdir -p "$corpus" "$findings" "$logs"
	echo "== fuzz_$name: $secs s, corpus $corpus, findings $findings ($(date -u +%FT%TZ))"
	# -jobs=1: one worker process, whose output libFuzzer writes to fuzz-0.log in the current
	# directory (printed below)
	(cd "$logs" && rm -f fuzz-0.log && "$O/fuzz/fuzz_$name" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=1024 -max_len=16384 -jobs=1 -workers=1 -print_final_stats=1 \
		-artifact_prefix="$findings/" "$corpus" "$R/tests/fuzz/corpus/$name") || rc=1
	grep -E '^(stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written|Done )' "$logs/fuzz-0.log" || true
	ls "$findings" | grep -q . && rc=1
done
[ "$rc" -eq 0 ] && echo "fuzz: no finding" || echo "fuzz: FINDINGS under $O/fuzz/findings/"
exit $rc
