#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_sizes.sh - scripts/check-sizes.py (make check-sizes) on made-up trees: it finds a function over
# 80 lines and a .c file over 800 lines in a folder nested below a product folder, in every product
# folder, in a header, and with the brace on the signature line. Exits non-zero on failure.
set -u
R=${SP_ROOT:?}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# func NAME LINES [BRACE]: a C function of LINES lines in all, its brace alone on a line (or on the
# signature line when BRACE is "inline")
func() {
	local i body=$(($2 - 3))
	if [ "${3:-}" = inline ]; then echo "int $1(void) {"; body=$((body + 1)); else echo "int $1(void)"; echo "{"; fi
	for ((i = 0; i < body; i++)); do echo "	x++;"; done
	echo "}"
}
# lines N: a file of N short lines with no function
lines() { local i; for ((i = 0; i < $1; i++)); do echo "int v$i;"; done; }
# tree: a fresh tree whose files are all within the rules
tree() {
	rm -rf "$T/t" && mkdir -p "$T/t"
	local d
	for d in cli collector/cupti/deep config decide preload trace; do mkdir -p "$T/t/$d"; done
	func ok 80 >"$T/t/collector/cupti/deep/a.c"
	lines 800 >"$T/t/cli/b.c"
}
# expect RC GREP DESCRIPTION: run the script in the tree; its exit status is RC and its output has GREP
expect() {
	local out rc
	out=$(cd "$T/t" && $PY "$R/scripts/check-sizes.py" 2>&1)
	rc=$?
	if [ "$rc" = "$1" ] && grep -qF -- "$2" <<<"$out$(echo; echo '(none)')"; then
		echo "ok   $3"
	else
		echo "FAIL $3 (exit $rc, wanted $1 and '$2'):"
		echo "$out"
		failed=1
	fi
}
tree
expect 0 "(none)" "a tree within the rules passes"
tree
func long 81 >"$T/t/collector/cupti/deep/long.c"
expect 1 "collector/cupti/deep/long.c:1: long() is 81 lines" "an 81-line function two folders below collector/ fails"
for d in cli config decide preload trace; do
	tree
	mkdir -p "$T/t/$d/room"
	func long_$d 90 >"$T/t/$d/room/x.c"
	expect 1 "$d/room/x.c:1: long_$d() is 90 lines" "a 90-line function in $d/room/ fails"
done
tree
mkdir -p "$T/t/config/room/inner"
lines 801 >"$T/t/config/room/inner/big.c"
expect 1 "config/room/inner/big.c: 801 lines (over 800)" "an 801-line .c file two folders below config/ fails"
tree
func inh 81 >"$T/t/decide/x.h"
expect 1 "decide/x.h:1: inh() is 81 lines" "an 81-line function in a header fails"
tree
func braced 81 inline >"$T/t/preload/braced.c"
expect 1 "preload/braced.c:1: braced() is 81 lines" "an 81-line function with its brace on the signature line fails"
exit $failed
