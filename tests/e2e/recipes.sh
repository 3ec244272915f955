#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# recipes.sh - the recipes of docs/RECIPES.md: every docs/recipes/*.ini passes `stepprof check` with
# no warning and no note its comments do not explain, and
# its dry run (`stepprof schedule`) is, step for step, what torch.profiler.schedule returns for the
# call its "; torch: schedule(...)" line names (tests/e2e/torch_schedule.py, a transcription that is
# first checked against the table computed with real torch in tests/data/schedule_torch.txt);
# RECIPES.md shows each INI exactly as the file holds it. Exits non-zero on failure.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
SP=$B/stepprof
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}

ok "the transcription matches real torch's table" $PY "$R/tests/e2e/torch_schedule.py" --self-test \
	"$R/tests/data/schedule_torch.txt"
n=0
for ini in "$R"/docs/recipes/*.ini; do
	name=$(basename "$ini")
	n=$((n + 1))
	"$SP" check "$ini" >/dev/null 2>"$T/check.err"
	ok "$name: stepprof check" [ $? = 0 ]
	# what check says must not contradict the recipe: no warning, and a note only where the INI
	# explains it ("; stepprof check notes ...")
	ok "$name: stepprof check warns of nothing" bash -c "! grep -q 'warning:' '$T/check.err'"
	if grep -q 'note:' "$T/check.err"; then
		ok "$name: its comments explain check's note" grep -q '^; stepprof check notes' "$ini"
	fi
	# one "; torch: schedule(...)" line, or one "; torch[PHASE]: ..." per [phase.PHASE] section
	phases=$(sed -n 's/^\[phase\.\(.*\)\]$/\1/p' "$ini")
	[ -n "$phases" ] || phases=-
	for ph in $phases; do
		if [ "$ph" = - ]; then
			call=$(sed -n 's/^; torch: //p' "$ini") what=$name sel=()
		else
			call=$(sed -n "s/^; torch\[$ph\]: //p" "$ini") what="$name [phase.$ph]" sel=(--phase "$ph")
		fi
		ok "$what: names its torch call" [ -n "$call" ]
		# enough steps to see every cycle and the end: skip_first + cycle x max(repeat, 3) + 5
		steps=$(cd "$R/tests/e2e" && $PY -c 'import sys, torch_schedule as t
a = t.parse_call(sys.argv[1])
print(a.get("skip_first", 0) + (a["wait"] + a["warmup"] + a["active"]) * max(a.get("repeat", 0), 3) + 5)' "$call")
		"$SP" schedule -c "$ini" "${sel[@]}" --count "$steps" >"$T/ours" 2>/dev/null
		$PY "$R/tests/e2e/torch_schedule.py" "$call" "$steps" >"$T/torch"
		ok "$what: stepprof schedule = torch's $call over $steps steps" diff "$T/torch" "$T/ours"
	done
	# the page shows the file as it is: an ini block whose first line is the file's first line
	$PY - "$R/docs/RECIPES.md" "$ini" <<'PY' >"$T/block"
import sys
doc, ini = open(sys.argv[1]).read(), open(sys.argv[2]).read()
first = ini.splitlines()[0]
for block in doc.split("```ini\n")[1:]:
    body = block.split("```", 1)[0]
    if body.splitlines()[0] == first:
        sys.stdout.write(body)
PY
	ok "$name: RECIPES.md shows it verbatim" cmp -s "$T/block" "$ini"
done
ok "at least 7 recipes" [ "$n" -ge 7 ]
ok "every recipe INI is named in RECIPES.md" bash -c 'for f in "$1"/docs/recipes/*.ini; do grep -q "docs/recipes/$(basename "$f")" "$1/docs/RECIPES.md" || exit 1; done' _ "$R"
[ "$failed" = 0 ] && echo "recipes: ok"
exit $failed
