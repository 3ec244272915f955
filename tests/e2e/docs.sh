#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs.sh - the documentation as GitHub renders it (tests/e2e/check_docs.py, Debian's
# python3-markdown-it): in every Markdown page of the tree, fences close and every relative link
# and #anchor resolves; in README.md and docs/RECIPES.md every `stepprof ...` quoted in the text
# names real commands, options and values, and runs (on a shipped trace) where it has no
# placeholder; README.md stays short (at most 150 lines) and gives no measured number without a
# link to where it was measured. The ```sh blocks are walked by readme_walk.sh. Exits non-zero on
# failure.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}
$PY -c 'import markdown_it' 2>/dev/null || {
	echo "FAIL $PY lacks markdown_it: make deps installs python3-markdown-it"
	exit 1
}
cd "$R" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t pages < <(git ls-files --cached --others --exclude-standard '*.md')
else
	mapfile -t pages < <(find . -name '*.md' -not -path './build/*' -not -path './dist/*' | sed 's|^\./||')
fi
ok "at least 10 Markdown pages found" [ "${#pages[@]}" -ge 10 ]
ok "fences, links and anchors of every page; stepprof commands of README.md and docs/RECIPES.md" \
	$PY tests/e2e/check_docs.py "$R" "${pages[@]}" --commands "$B/stepprof" --run README.md --run docs/RECIPES.md \
	--measured README.md
ok "README.md: at most 150 lines" [ "$(wc -l <README.md)" -le 150 ]
ok "README.md links the benchmarks and the limits" bash -c 'grep -q "](docs/BENCHMARKS.md" README.md && grep -q "](docs/LIMITS.md" README.md'
# the checker fails on what GitHub renders wrongly
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '# A\n\n```sh\nx\n``` text after\n\n## B\n' >"$T/fence.md"
printf '# A\n\n[b](nothere.md) [c](#no-such) [d](fence.md#b)\n' >"$T/links.md"
printf '# A\n\nIt costs 1.3x more.\n\n- 5 ms a step ([measured](links.md))\n' >"$T/num.md"
$PY tests/e2e/check_docs.py "$T" "$T/fence.md" "$T/links.md" "$T/num.md" --measured "$T/num.md" >"$T/out" 2>&1
ok "the checker: a closing fence with text after it" grep -q "fence.md:5: .* does not close the fence of line 3" "$T/out"
ok "the checker: a link to no file" grep -q "links.md:3: link to 'nothere.md': no such file" "$T/out"
ok "the checker: an anchor no heading has" grep -q "link to '#no-such': .* has no heading" "$T/out"
ok "the checker: a heading inside a broken fence is no anchor" grep -q "link to 'fence.md#b'" "$T/out"
ok "the checker: a measured number without a link" grep -q "num.md:3: a measured number" "$T/out"
ok "the checker: a measured number with a link" bash -c "! grep -q 'num.md:5' '$T/out'"
printf '# A\n\nRun `stepprof convert t.sptrace -o x.json.gz` or `stepprof trigger --steps 5 --job D`.\n' >"$T/cmd.md"
$PY tests/e2e/check_docs.py "$T" "$T/cmd.md" --commands "$B/stepprof" --run "$T/cmd.md" >"$T/out" 2>&1
ok "the checker: a convert example TensorBoard would not find" grep -q "cmd.md:3: convert -o x.json.gz: not a name" "$T/out"
ok "the checker: an option the command does not have" grep -q "cmd.md:3: .*trigger has no option --steps" "$T/out"
[ "$failed" = 0 ] && echo "docs: ok"
exit $failed
