#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trace_size.sh - bytes per kernel of the trace format (whole file / kernels, API, marker and step
# records and strings included) on recorded real streams: gen_stream turns the token recordings of
# karpathy/llm.c and of nanoGPT's trainer (tests/data/corpus) into one long window each, their CPU
# side the recording's and their GPU side modelled (tests/e2e/gen_stream.c says how); the file
# must stay under the bound and read back whole (every kernel, report runs). Format version 4
# stored 14.7 and 10.7 bytes per kernel here.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
# name tokens bound
while read -r name tokens bound; do
	out=$("$B/tests/e2e/gen_stream" "$R/tests/data/corpus/$tokens" "$T/$name.sptrace") || {
		echo "FAIL $name: gen_stream"
		fails=$((fails + 1))
		continue
	}
	kernels=${out#kernels }
	size=$(stat -c %s "$T/$name.sptrace")
	per=$(awk -v s="$size" -v k="$kernels" 'BEGIN { printf "%.2f", s / k }')
	read_back=$("$B/stepprof" dump "$T/$name.sptrace" | grep -c '^kernel ')
	if awk -v p="$per" -v b="$bound" 'BEGIN { exit !(p <= b) }' && [ "$read_back" = "$kernels" ] &&
		"$B/stepprof" report "$T/$name.sptrace" >"$T/$name.report" 2>&1; then
		echo "ok   $name: $kernels kernels, $size bytes, $per bytes per kernel (at most $bound)"
	else
		echo "FAIL $name: $kernels kernels ($read_back read back), $size bytes, $per bytes per kernel (at most $bound)"
		fails=$((fails + 1))
	fi
done <<'LIST'
llmc llmc.tokens 11.0
nanogpt nanogpt_accum.tokens 8.0
LIST
[ "$fails" -eq 0 ] && echo "trace_size: ok"
[ "$fails" -eq 0 ]
