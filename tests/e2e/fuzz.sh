#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz.sh - the libFuzzer harnesses of tests/fuzz/ (built by `make test` with clang, ASan and
# UBSan), briefly: each runs every committed regression input (tests/fuzz/regress/NAME/: crashes
# and hangs found before, fixed) and its seed corpus, then fuzzes for FUZZ_TEST_SECONDS (default
# 6) from the seeds in a scratch corpus. Any crash, sanitizer report, leak, hang (10 s) or memory
# over 1 GiB fails the test. `make fuzz` is the long run (tests/fuzz/run.sh).
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
S=${FUZZ_TEST_SECONDS:-6}
fail() { echo "FAIL: $*" >&2; exit 1; }
compgen -G "$B/fuzz/fuzz_*" >/dev/null ||
	fail "no fuzz harness in $B/fuzz: \`make test\` builds them (\`make test-build\` does not; \`make fuzz-build\`)"
for h in "$B"/fuzz/fuzz_*; do
	name=${h##*/fuzz_}
	inputs=("$R/tests/fuzz/corpus/$name"/*)
	[ -d "$R/tests/fuzz/regress/$name" ] && inputs+=("$R/tests/fuzz/regress/$name"/*)
	"$h" -timeout=10 -rss_limit_mb=1024 "${inputs[@]}" >"$T/replay.log" 2>&1 ||
		fail "fuzz_$name on its regression inputs and seeds: $(grep -m5 -E 'ERROR|SUMMARY|Running:' "$T/replay.log")"
	mkdir -p "$T/corpus/$name" "$T/findings/$name"
	"$h" -max_total_time="$S" -timeout=10 -rss_limit_mb=1024 -max_len=16384 -print_final_stats=1 \
		-artifact_prefix="$T/findings/$name/" "$T/corpus/$name" "$R/tests/fuzz/corpus/$name" \
		>"$T/fuzz.log" 2>&1 || {
		mkdir -p "$B/fuzz/findings/$name"
		cp "$T/findings/$name"/* "$B/fuzz/findings/$name/" 2>/dev/null || true
		fail "fuzz_$name found something (kept in $B/fuzz/findings/$name): $(grep -m5 -E 'ERROR|SUMMARY' "$T/fuzz.log")"
	}
	echo "ok   fuzz_$name: ${#inputs[@]} regression and seed inputs, then $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$T/fuzz.log" | grep -o '[0-9]*$') runs in $S s: nothing found"
done
