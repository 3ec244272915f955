#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# readme_walk.sh [DOC] - walks the commands of README.md and docs/RECIPES.md (or DOC) in order, as a new user types
# them, in an empty directory that holds what a fresh clone plus `make` holds (build/): every
# ```sh block, every line, through one bash with `set -euo pipefail`, so a command that fails as
# written fails the test. The profiled runs (a program under LD_PRELOAD or `stepprof run -- CMD`)
# need a GPU: they are skipped (and listed), and what they would have written is put in their
# place first: two runs of two ranks each in stepprof-traces/RUN/ (tests/e2e/gen_golden's trace
# with ranks 0 and 1 and a run id; the older run an hour older). ```ini blocks whose first line
# is "; NAME" are written to NAME. Then the outputs the commands promise are checked.
set -u
B=${SP_BUILD:?} R=${SP_ROOT:?}
DOC=${1:-$R/README.md}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
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
ln -s "$B" build
mkdir -p docs && cp -r "$R/docs/recipes" docs/

# what the profiled runs would have left: two runs, two ranks each, steps 16-17 as prof.ini records
mk_run() { # mk_run RUN_ID AGE
	mkdir -p "stepprof-traces/$1" "profiling_outputs/$1"
	for r in 0 1; do
		"$B/tests/e2e/gen_golden" "stepprof-traces/$1/rank$r.golden-host.$((4242 + r)).sptrace" "$r" "$1" 16 || exit 1
		cp "stepprof-traces/$1/rank$r.golden-host.$((4242 + r)).sptrace" "profiling_outputs/$1/"
	done
	touch -d "$2" "stepprof-traces/$1" "profiling_outputs/$1"
}
mk_run 20261126-090000-1111 "1 hour ago"
mk_run 20261126-100000-2222 "1 minute ago"
for d in fwd fwd_bwd; do mkdir -p "stepprof-traces/$d" && cp stepprof-traces/20261126-100000-2222/*.sptrace "stepprof-traces/$d/"; done
touch -d "2 hours ago" stepprof-traces/fwd stepprof-traces/fwd_bwd
# the two-phase run of RECIPES.md (rl-phases.ini, -o profiler): windows of phases fwd and fwd_bwd
# (the collector writes a trace per phase: profiler/fwd/ and profiler/fwd_bwd/)
for ph in fwd fwd_bwd; do
	mkdir -p profiler/$ph && GEN_PHASES_ONLY=$ph "$B/tests/e2e/gen_phases" profiler/$ph/rank0.golden-host.4242.sptrace || exit 1
done

# the document's blocks: ini files, and the sh lines as one script
$PY - "$DOC" "$T/walk.sh" "$T/skipped.txt" <<'PY' || exit 1
import re, sys
doc, script, skipped = open(sys.argv[1]).read(), open(sys.argv[2], "w"), open(sys.argv[3], "w")
# a profiled run: a program under the preloaded library, or `stepprof run ... -- CMD`
profiled = re.compile(r"LD_PRELOAD|\bstepprof run\b|^(mpirun|srun|torchrun|python)\b")
# make targets: the test itself runs inside `make test`; deps needs root; demo is tested elsewhere
make = re.compile(r"^make\b")
script.write("set -euo pipefail\ntrap 'echo \"FAILED AS WRITTEN: $BASH_COMMAND\" >&2' ERR\n")
for lang, body in re.findall(r"```(\w*)\n(.*?)```", doc, re.S):
    lines = body.splitlines()
    if lang == "ini" and lines and lines[0].startswith("; "):
        name = lines[0][2:].split()[0]
        if "/" not in name:
            open(name, "w").write(body)
        continue
    if lang != "sh":
        continue
    for line in lines:
        cmd = line.strip()
        if not cmd or cmd.startswith("#"):
            continue
        if profiled.search(cmd) or make.search(cmd):
            skipped.write(cmd + "\n")
            continue
        script.write(f"echo '+ {cmd.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}'\n{cmd}\n")
PY
n=$(grep -c '^echo' walk.sh)
echo "walking $n commands of $(basename "$DOC") (skipped, need a GPU or root: $(wc -l <skipped.txt))"
sed 's/^/  not walked (GPU or root): /' skipped.txt
bash walk.sh >walk.out 2>walk.err
rc=$?
ok "$(basename "$DOC"): every command succeeds as written" [ "$rc" = 0 ]
[ "$rc" = 0 ] || { tail -n 5 walk.out; cat walk.err; }
ok "$(basename "$DOC"): at least 8 commands walked" [ "$n" -ge 8 ]
if [ "$(basename "$DOC")" = README.md ]; then
	ok "prof.ini came from the README and passes check" eval "\"$B/stepprof\" check prof.ini >/dev/null"
	ok "report --json is JSON with a schema version" $PY -c 'import json, sys; d = json.load(open("summary.json")); assert d["schema_version"] >= 1 and d["stepprof_version"]'
	ok "the merged file holds both ranks" $PY -c 'import gzip, json; d = json.load(gzip.open("job.pt.trace.json.gz")); n = {e["args"]["name"] for e in d["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}; assert any("rank 0" in x for x in n) and any("rank 1" in x for x in n), n'
	ok "convert without -o: the windows' files in the current directory" bash -c "ls rank0.golden-host.4242.*.pt.trace.json.gz >/dev/null"
	ok "memory without -o: the page in the current directory" test -s rank0.golden-host.4242.memory.html
	ok "folded stacks written" test -s allocs.folded
	ok "the skipped commands are the profiled runs and make targets only" [ "$(grep -cv 'LD_PRELOAD\|stepprof run\|^make\|^mpirun' skipped.txt)" = 0 ]
fi
# with no argument: README.md, then the commands of docs/RECIPES.md the same way
if [ $# -eq 0 ]; then
	bash "$R/tests/e2e/readme_walk.sh" "$R/docs/RECIPES.md" || failed=1
fi
exit $failed
