#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# newuser.sh - the first hour of a new user, without a GPU: one run is one folder (stepprof run
# gives every process it starts one run id; steps and convert --merge-ranks refuse traces of two
# runs), `stepprof run` blames a command it cannot start and not the schedule, --version agrees
# with config/version.h and the trace header, `make install PREFIX=...` gives a working binary,
# man page, completion and docs, `make help` answers, and the demo works without a GPU from the
# source tree and from a dist folder alone. Exits non-zero on failure.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
SP=$B/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD SLURM_JOB_ID TORCHELASTIC_RUN_ID PMIX_NAMESPACE
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}
cd "$T" || exit 1
asan=$(ldd "$B/libstepprof.so" 2>/dev/null | awk '/libasan/ {print $3}')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0

# --- one run, one folder -------------------------------------------------------------------------
"$SP" run -- sh -c 'echo "$STEPPROF_RUN_ID"; sh -c "echo \$STEPPROF_RUN_ID"' >ids.txt 2>run.err
ok "stepprof run: every process it starts shares one run id" [ "$(sort -u ids.txt | wc -l)" = 1 ]
ok "the run id is DATE-TIME-PID of stepprof run" grep -Eqx '[0-9]{8}-[0-9]{6}-[0-9]+' ids.txt
STEPPROF_RUN_ID=mine "$SP" run -- sh -c 'echo "$STEPPROF_RUN_ID"' >ids2.txt 2>/dev/null
ok "a run id the user set is kept" grep -qx mine ids2.txt
"$SP" run -- nosuchcommand-xyz >nx.out 2>nx.err
rc=$?
ok "run -- nosuchcmd: exit 127" [ "$rc" = 127 ]
ok "run -- nosuchcmd: says it cannot run it" grep -qF "stepprof run: cannot run 'nosuchcommand-xyz': No such file or directory" nx.err
ok "run -- nosuchcmd: does not blame the schedule" bash -c '! grep -q schedule nx.err'
"$SP" run -c /nonexistent.ini -o x -- true 2>c.err
ok "run -c/-o short options (a missing config is named)" grep -qF "/nonexistent.ini" c.err
G=$B/tests/e2e/gen_golden
mkdir a b
"$G" a/rank0.h.1.sptrace 0 run-a && "$G" a/rank1.h.2.sptrace 1 run-a
"$G" b/rank0.h.3.sptrace 0 run-b && "$G" b/rank1.h.4.sptrace 1 run-b
"$SP" steps a/*.sptrace >s1.out 2>s1.err
ok "steps on one run's ranks works" [ $? = 0 ]
"$SP" steps a/*.sptrace b/*.sptrace >s2.out 2>s2.err
rc=$?
ok "steps on two runs: refused (exit 1)" [ "$rc" = 1 ]
ok "steps on two runs: says which trace is which run" bash -c 'grep -q "come from 2 different runs" s2.err && grep -q "run run-a: a/rank0.h.1.sptrace a/rank1.h.2.sptrace" s2.err && grep -q "run run-b: b/rank0.h.3.sptrace b/rank1.h.4.sptrace" s2.err'
ok "steps on two runs: prints no table" [ ! -s s2.out ]
"$SP" convert --merge-ranks -o m.json a/rank0.h.1.sptrace b/rank1.h.4.sptrace 2>m.err
ok "convert --merge-ranks on two runs: refused (exit 1)" [ $? = 1 ]
ok "convert --merge-ranks on two runs: names them" grep -q "come from 2 different runs" m.err
"$G" a/rank0.h.9.sptrace 0 run-a
"$SP" steps a/*.sptrace >/dev/null 2>d.err
ok "the same rank twice in one run: refused" grep -q "both rank 0 of run run-a" d.err

# --- progress line: on a terminal only, after a second (here: at once), erased at the end ---------
if command -v script >/dev/null; then
	STEPPROF_PROGRESS_AFTER=0 script -qec "'$SP' report a/rank0.h.1.sptrace >/dev/null" /dev/null >pty.out 2>&1
	ok "progress line on a terminal" grep -q "stepprof report: reading the trace: [0-9]*% of" pty.out
	ok "progress line erased at exit" bash -c "tail -c 4 pty.out | od -c | grep -q '033   \[   K'"
	STEPPROF_PROGRESS_AFTER=0 "$SP" report a/rank0.h.1.sptrace >/dev/null 2>np.err
	ok "no progress line when stderr is not a terminal" [ ! -s np.err ]
else
	echo "FAIL script(1) (bsdutils) is missing: the progress line is not tested"
	failed=1
fi

# --- stacks on a trace recorded without stacks: says so, exit 1 (not an empty success) ----------
SP_WRITE_NCCL_SAMPLE=$T "$B/tests/test_nccl" >/dev/null 2>&1
"$SP" stacks rank0.sptrace -o st.folded >st.out 2>st.err
ok "stacks without stacks: exit 1" [ $? = 1 ]
ok "stacks without stacks: says why" grep -q "holds no call stacks: it was recorded without \[activities\] stacks = native, python or both" st.err
ok "stacks without stacks: no empty file left" [ ! -e st.folded ]

# --- diff --json -----------------------------------------------------------------------------------
"$SP" diff a/rank0.h.1.sptrace b/rank0.h.3.sptrace --json >diff.json
ok "diff --json: a JSON object with schema and rows" python3 -c 'import json; d = json.load(open("diff.json")); assert d["schema"] == "stepprof.diff" and d["schema_version"] >= 1 and len(d["kernels"]) == 2 and d["base"]["steps"] == 2, d'

"$SP" memory a/rank0.h.1.sptrace -o mem.html --json >mem.json 2>mem.err
ok "memory --json: a JSON object with the peaks; the page still written" python3 -c 'import json, os; d = json.load(open("mem.json")); s = d["windows"][0]["series"][0]; assert d["schema"] == "stepprof.memory" and s["peak_bytes"] == 1052672 and len(s["alive_at_peak"]) == 2 and os.path.getsize("mem.html") > 0, d'

"$SP" report a/*.sptrace >/dev/null 2>many.err
ok "report on a glob of several traces: says one at a time and what reads several" grep -q "one trace at a time, got 3 .*stepprof steps" many.err

# --- the shipped GPU recording through every single-trace command ------------------------------
for real in "$R"/tests/data/demo/*.sptrace; do
	[ -f "$real" ] || continue
	"$SP" report "$real" >real.txt 2>&1
	ok "real trace: report" [ $? = 0 ]
	ok "real trace: report names its kernels" grep -q "ncclDevKernel_AllReduce" real.txt
	ok "real trace: report --sort self_cuda_time_total --json" bash -c "'$SP' report '$real' --sort self_cuda_time_total --json | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d[\"kernels\"] and d[\"windows\"]'"
	ok "real trace: convert" "$SP" convert "$real" -o real.pt.trace.json.gz
	ok "real trace: steps" bash -c "'$SP' steps '$real' >/dev/null"
	ok "real trace: memory --json" bash -c "'$SP' memory '$real' -o real.html --json 2>/dev/null | python3 -c 'import json, sys; json.load(sys.stdin)'"
	ok "real trace: diff against the golden" bash -c "'$SP' diff '$real' '$R/tests/golden/small.sptrace' --json >/dev/null"
	ok "real trace: dump" bash -c "'$SP' dump '$real' >/dev/null"
done

# --- version -------------------------------------------------------------------------------------
v=$(sed -n 's/^#define SP_VERSION "\(.*\)"/\1/p' "$R/config/version.h")
ok "stepprof --version prints config/version.h's version" grep -q "^stepprof $v " <("$SP" --version)
ok "report --json carries it" grep -q "\"stepprof_version\":\"$v\"" <("$SP" report a/rank0.h.1.sptrace --json)
ok "dump shows the header's run id" grep -qx "run_id: run-a" <("$SP" dump a/rank0.h.1.sptrace)

# --- make help, install, man, completion -----------------------------------------------------------
MK="make --no-print-directory -s -C $R O=$B"
unset MAKEFLAGS MFLAGS MAKELEVEL
$MK help >help.out 2>&1
ok "make help lists install and demo" bash -c "grep -q 'make install' help.out && grep -q 'make demo' help.out"
$MK install PREFIX="$T/inst" >inst.log 2>&1
ok "make install PREFIX=...: exit 0" [ $? = 0 ] || cat inst.log
ok "installed stepprof --version" grep -q "^stepprof $v " <("$T/inst/bin/stepprof" --version)
ok "installed stepprof finds its library (run)" bash -c "'$T/inst/bin/stepprof' run -- sh -c 'case \$LD_PRELOAD in *$T/inst/lib/libstepprof*) exit 0;; esac; exit 1' 2>/dev/null"
PATH="$T/inst/bin:$PATH" MANPATH= MANWIDTH=200 env -u LD_PRELOAD man stepprof >man.out 2>&1 # man(1) is no ASan program
if grep -q "minimized" man.out; then # an Ubuntu minimized image replaces man(1) by a stub
	echo "note: man(1) is the 'minimized system' stub here: checking manpath and the page with groff"
	ok "man: the installed page is on the manpath PATH gives" bash -c "PATH='$T/inst/bin':\$PATH MANPATH= manpath 2>/dev/null | tr : '\n' | grep -qx '$T/inst/share/man'"
	groff -man -Tascii "$T/inst/share/man/man1/stepprof.1" 2>/dev/null | sed 's/.\x08//g' >man.out
fi
ok "man stepprof (PATH-derived manpath)" grep -q 'profile unmodified GPU programs' man.out
ok "the man page documents every command's options" grep -q -- '--merge-ranks' man.out
ok "docs and recipes installed" test -s "$T/inst/share/doc/stepprof/RECIPES.md" -a -s "$T/inst/share/doc/stepprof/recipes/a4s.ini" -a -s "$T/inst/share/doc/stepprof/LICENSE"
ok "bash completion completes commands" bash -c "source '$T/inst/share/bash-completion/completions/stepprof'; PATH='$T/inst/bin':\$PATH; COMP_WORDS=(stepprof rep); COMP_CWORD=1; _stepprof; [ \"\${COMPREPLY[*]}\" = report ]"
ok "bash completion completes options from --help" bash -c "source '$T/inst/share/bash-completion/completions/stepprof'; PATH='$T/inst/bin':\$PATH; COMP_WORDS=(stepprof convert --merge-r); COMP_CWORD=2; _stepprof; [ \"\${COMPREPLY[*]}\" = --merge-ranks ]"
$MK uninstall PREFIX="$T/inst" >/dev/null 2>&1
ok "make uninstall removes it" test ! -e "$T/inst/bin/stepprof" -a ! -e "$T/inst/share/doc/stepprof"
ok "make uninstall leaves no empty folder it made" [ -z "$(find "$T/inst" -mindepth 1 -type d -empty)" ]

# --- the demo without a GPU ---------------------------------------------------------------------------
if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then
	echo "note: this machine has a GPU: the no-GPU demo checks are not run here"
else
	(cd "$R" && scripts/demo.sh "$B") >demo.out 2>&1
	ok "demo without a GPU: exit 0" [ $? = 0 ]
	ok "demo without a GPU: says so" grep -q "has no NVIDIA GPU" demo.out
	ok "demo without a GPU: shows a report" grep -q "^Name .* Calls .* Total" demo.out
	if ls "$R"/tests/data/demo/*.sptrace >/dev/null 2>&1; then
		ok "demo without a GPU: the shipped GPU recording, said to be one" grep -q "a trace recorded on a GPU machine" demo.out
	else
		ok "demo without a GPU: the synthetic stand-in, said to be one" grep -q "synthetic test trace" demo.out
	fi
	(cd "$R" && scripts/make-dist.sh "$B" "$T/dist/stepprof") >dist.log 2>&1
	ok "make-dist.sh into a scratch folder" [ $? = 0 ] || cat dist.log
	mv "$T/dist/stepprof" "$T/moved" # from the dist folder alone, wherever it lies
	"$T/moved/share/stepprof/demo.sh" >ddemo.out 2>&1
	rc=$?
	ok "dist demo without a GPU: exit 0" [ "$rc" = 0 ]
	ok "dist demo without a GPU: a report" grep -q "^Name .* Calls" ddemo.out
	ok "dist demo: names its own paths, not ../../bin" bash -c "! grep -q '\.\./\.\./bin' ddemo.out && grep -q '$T/moved/bin/stepprof' ddemo.out"
	ok "dist demo: no 'make demo' in a copy without a Makefile" bash -c "! grep -q 'make demo' ddemo.out"
	ok "dist demo: a TensorBoard name in its convert example" grep -q "convert .* -o demo.pt.trace.json.gz" ddemo.out
	ok "dist has the docs the messages point to" test -s "$T/moved/share/doc/stepprof/CONFIG.md" -a -s "$T/moved/share/man/man1/stepprof.1"
fi
[ "$failed" = 0 ] && echo "newuser: ok"
exit $failed
