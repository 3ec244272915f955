#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_grammar.sh - one option grammar across the commands, and messages that name what the user
# typed: --help, bash completion (`stepprof --complete`) and the parsers agree option for option and
# value for value; --steps, --window, --set, --ranks, --wide, -o DIR/ mean one thing everywhere;
# convert and memory write into the current directory by default and warn when a name's extension
# does not match what is written; each error names what was typed, once, with the command's prefix,
# and a "not found" says what exists. Exits non-zero on failure.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
SP=$B/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}
cd "$T" || exit 1
GOLD=$R/tests/golden/small.sptrace
DEMO=$R/tests/data/demo/rank0.sptrace

# --- --help, completion and the parsers from one table ------------------------------------------
cmds=$("$SP" --complete)
ok "--complete lists the commands of --help" [ "$cmds" = "$("$SP" --help | awk '/^  [a-z]+ /{print $1}')" ]
for c in $cmds; do
	"$SP" --complete "$c" >"comp.$c.full"
	awk '$1 ~ /^--/ {print $1}' "comp.$c.full" | sort >"comp.$c"
	"$SP" "$c" --help | sed -n '/^options:/,$p' | grep -o -- '--[a-z][a-z-]*' | sort -u >"help.$c"
	ok "$c: --help shows exactly the options completion offers" diff "comp.$c" "help.$c"
	ok "$c: --help names no internal (issue numbers, sp_ functions)" bash -c "! '$SP' $c --help | grep -Eq 'issue [0-9]|sp_[a-z]+'"
done
# every value completion offers is one the parser takes, and a bad one is refused naming them all
trace_arg() { case $1 in report | convert | memory | stacks | dump | steps) echo "$GOLD" ;; diff) echo "$GOLD $GOLD" ;; esac; }
for c in $cmds; do
	out=()
	grep -q '^--output ' "comp.$c.full" 2>/dev/null && out=(-o "out.$c")
	while read -r opt arg; do
		[[ $arg == *\|* ]] && grep -q '[a-z]' <<<"$arg" || continue # a list with values, not only metavars
		vals=$(tr '|' '\n' <<<"$arg")
		for v in $(grep '[a-z]' <<<"$vals"); do
			"$SP" "$c" "$opt" "$v" "${out[@]}" $(trace_arg "$c") >/dev/null 2>"err.$c.$v"
			ok "$c $opt $v: taken" bash -c "[ $? != 2 ] && ! grep -q 'wants' 'err.$c.$v'"
		done
		"$SP" "$c" "$opt" bogus $(trace_arg "$c") >/dev/null 2>"bad.$c"
		ok "$c $opt bogus: refused, naming every value completion offers" bash -c "grep -q \"^stepprof $c: $opt wants .*, not 'bogus'\" bad.$c &&
			for v in $(tr '\n' ' ' <<<"$vals"); do grep -qw \"\$v\" bad.$c || exit 1; done"
	done < <(grep '^--' "comp.$c.full")
done
source "$R/scripts/stepprof-completion.bash"
complete_words() { # complete_words WORD...: what completing the last word offers
	local PATH=$B:$PATH
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	_stepprof
	echo "${COMPREPLY[*]}"
}
ok "completion: report --by offers report's values" [ "$(complete_words stepprof report --by '')" = "kernel line frame op module" ]
ok "completion: stacks --weight offers bytes and calls" [ "$(complete_words stepprof stacks --weight '')" = "bytes calls" ]
ok "completion: --window offers all (N is typed)" [ "$(complete_words stepprof diff --window '')" = "all" ]

# --- one grammar: --steps, --set, --ranks, --wide, -o DIR/ ---------------------------------------
ok "schedule --steps A is step A, as convert takes it" [ "$("$SP" schedule --steps 5 2>/dev/null)" = "5 NONE" ]
ok "schedule --steps A-B" [ "$("$SP" schedule --steps 11-12 2>/dev/null | tr '\n' ' ')" = "11 RECORD 12 RECORD " ]
"$SP" convert "$GOLD" --steps 2- -o from2.json 2>/dev/null
ok "convert --steps A- (from A on)" test -s from2.json
"$SP" check --set schedule.wait=3 --ranks 0,7 >set.out 2>&1
ok "check --set and --ranks" bash -c "grep -qx 'wait = 3' set.out && grep -qx 'ranks = 0,7' set.out"
ok "check names what was set on the command line" grep -qF "# set on the command line: --set schedule.wait=3, --ranks 0,7" set.out
"$SP" diff "$DEMO" "$DEMO" --top 0 >narrow.txt 2>&1
"$SP" diff "$DEMO" "$DEMO" --top 0 --wide >wide.txt 2>&1
ok "diff cuts long names and says how to see them" bash -c "grep -q '^void at::native::(anonymous namespace)::multi_t\.\.\.' narrow.txt && grep -q -- '--wide shows them whole' narrow.txt"
ok "diff --wide: full names, each row its own" bash -c "[ \$(grep -c '^void at::native::(anonymous namespace)::multi_tensor_apply' wide.txt) -ge 2 ] && [ \$(grep '^void at::native' wide.txt | sort | uniq -d | wc -l) = 0 ]"

# --- output names and places ------------------------------------------------------------------------
mkdir -p traces here there && cp "$GOLD" traces/run.sptrace
(cd here && "$SP" convert ../traces/run.sptrace 2>/dev/null && "$SP" memory ../traces/run.sptrace >/dev/null)
ok "convert writes into the current directory" bash -c "ls here/run.*.pt.trace.json.gz >/dev/null 2>&1"
ok "memory writes into the current directory" test -s here/run.memory.html
ok "nothing is written beside the trace" [ "$(ls traces)" = run.sptrace ]
"$SP" convert traces/run.sptrace -o there/ 2>/dev/null
"$SP" memory traces/run.sptrace -o there >/dev/null
ok "convert -o DIR/ writes inside DIR" bash -c "ls there/run.*.pt.trace.json.gz >/dev/null 2>&1"
ok "memory -o DIR writes inside DIR" test -s there/run.memory.html
"$SP" convert traces/run.sptrace -o new/sub/ 2>/dev/null
ok "convert -o DIR/ of a folder that is not there: made" bash -c "ls new/sub/run.*.pt.trace.json.gz >/dev/null 2>&1"
touch afile
"$SP" memory traces/run.sptrace -o afile/x/ >/dev/null 2>nodir.err
ok "memory -o DIR/ that cannot be made: says why" grep -q "^stepprof memory: cannot create afile/x: Not a directory" nodir.err
"$SP" memory traces/run.sptrace -o x.json >/dev/null 2>mx.err
ok "memory -o x.json: a warning that it is HTML" grep -q "stepprof memory: warning: x.json gets an HTML page" mx.err
"$SP" convert traces/run.sptrace --window 0 -o out.html 2>cx.err
ok "convert -o out.html: a warning that it is JSON" grep -q "stepprof convert: warning: out.html gets Chrome trace JSON" cx.err
"$SP" convert traces/run.sptrace --window 0 -o fine.pt.trace.json.gz 2>cf.err
ok "convert -o NAME.pt.trace.json.gz: no warning" bash -c "! grep -q warning cf.err"

# --- messages: what was typed, once, with the command's prefix; what exists ------------------------
"$SP" run --set marker.kind=nvtx -- true 2>r1.err
ok "run --set: the error names --set as typed" grep -q "^stepprof run: --set marker.kind=nvtx: \[marker\] kind: nvtx needs a pattern" r1.err
ok "run --set: no variable the user never set" bash -c "! grep -q STEPPROF_MARKER_KIND r1.err"
"$SP" run --ranks 0,x -- true 2>r2.err
ok "run --ranks: the error names --ranks" grep -q "^stepprof run: --ranks 0,x: \[ranks\] ranks: bad rank or range 'x'" r2.err
"$SP" diff "$GOLD" "$GOLD" --window 4 2>d4.err
ok "diff --window 4: said once" [ "$(wc -l <d4.err)" = 1 ]
ok "diff --window 4: says which windows exist" grep -q "no recorded step in window 4 of either trace (BASE .*: windows 0; NEW .*: windows 0)" d4.err
"$SP" convert "$GOLD" --steps 99 2>c99.err
ok "convert --steps 99: says which steps exist" grep -q "has no recorded step in --steps 99; it holds steps .* (window 0)" c99.err
"$SP" check nonexist.ini 2>ck.err
ok "check nonexist.ini: the command's prefix" grep -q "^stepprof check: nonexist.ini: cannot open" ck.err
"$SP" report traces/ 2>rd.err
ok "report DIR/: the files in it, without //" bash -c "grep -qF 'traces/*.sptrace' rd.err && ! grep -q '//' rd.err"
mkdir -p empty
"$SP" report empty 2>re.err
ok "report of a folder without traces: says it holds none" grep -q "it holds no .sptrace file" re.err
head -c 800 "$GOLD" >cut.sptrace
"$SP" report cut.sptrace 2>cut.err
ok "report on a cut trace: says it was cut short" grep -q "^stepprof report: cut.sptrace holds no complete window: the file was cut short" cut.err
"$SP" report "$GOLD" --window 7 2>w7.err
ok "report --window 7: names the windows there are" grep -q "has no window 7; its only window is 0" w7.err
"$SP" stacks "$DEMO" 2>st.err
ok "stacks without stacks: the key's values" grep -q "stacks = native, python or both" st.err
"$SP" steps "$R"/tests/data/straggler/host/*.sptrace >host.out 2>&1
ok "host straggler: a compute difference is called a difference" bash -c "grep -q 'differences: compute' host.out && ! grep -q 'its compute (' host.out"
"$SP" run -- true 2>rn.err
ok "run's own lines carry its prefix" grep -q "^stepprof run: no trace written" rn.err
"$SP" nosuchcmd 2>nc.err
ok "an unknown command: the commands there are" grep -q "^stepprof: unknown command 'nosuchcmd' (commands: run check" nc.err
ok "autostep --help: no development history" bash -c "! '$SP' autostep --help | grep -Eiq 'issue|sp_stepdet'"
ok "no note for the lead left in tests/data" bash -c "! find '$R/tests/data' -name 'README-lead*' | grep -q ."

[ "$failed" = 0 ] && echo "cli_grammar: ok"
exit $failed
