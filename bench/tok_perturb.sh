#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tok_perturb.sh [BUILD] - automatic step detection on the recorded corpus (tests/data/corpus/),
# each stream rewritten by bench/tok_perturb.c with one change real programs make (see there):
# a noisier clock, a loss read every N iterations on top of the loop's own, the loop's only
# synchronisation every N iterations, dropped or extra launches. Prints one line per stream and
# change, and a table per change: ok (`stepprof autostep --check --windows` agrees with the
# truth), undecided (no step, said), wrong (steps or windows that disagree with the truth).
# A diagnostic, not a test: it gates nothing (tests/e2e/autostep_corpus.sh is the gate).
set -u
cd "$(dirname "$0")/.." || exit 2
B=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
gcc -O2 -I. bench/tok_perturb.c "$B/libspcore.a" -lzstd -lm -lpthread -o "$T/perturb" || exit 2
MODES=${MODES:-"jitter 0.3|jitter 0.8|log 10|log 3|logmid 10|ckpt 20|thin 10|drop 0.005|extra 7"}
IFS='|' read -ra modes <<<"$MODES"
for f in tests/data/corpus/*.tokens; do
	n=$(basename "$f" .tokens)
	opt=--windows
	grep -qsiE '^[[:space:]]*expect[[:space:]]*=[[:space:]]*no-?lock' "tests/data/corpus/$n.txt" && opt=--no-lock
	for m in "${modes[@]}"; do
		# shellcheck disable=SC2086 # "MODE ARG"
		"$T/perturb" "$f" "$T/p.sptokens" $m 1 || { echo "perturb-failed $n [$m]"; continue; }
		if "$B/stepprof" autostep --check "$opt" "$T/p.sptokens" >"$T/out" 2>"$T/err"; then
			v=ok
		elif grep -q "no step found" "$T/err"; then
			v=undecided
		else
			v=wrong
		fi
		echo "$v $n [$m] $(head -c 160 "$T/err" | tr '\n' ' ' | sed "s#$T/p.sptokens: ##")"
		rm -f "$T/p.sptokens"
	done
done | tee "$T/all"
echo
echo "| change | ok | undecided (said) | wrong |"
echo "|---|---|---|---|"
for m in "${modes[@]}"; do
	printf '| %s | %s | %s | %s |\n' "$m" "$(grep -c "^ok .*\[$m\]" "$T/all")" \
		"$(grep -c "^undecided .*\[$m\]" "$T/all")" "$(grep -c "^wrong .*\[$m\]" "$T/all")"
done
