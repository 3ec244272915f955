#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# device-newuser.sh - one device call (GPU machine, from the repo root, after `make dist` on the
# build machine): what issue 19 promises a new user, on real GPUs.
#  1. the demo from a copy of dist/ alone profiles the bundled workload; its trace (run id and
#     version in the header) is kept in $OUT/demo/ to be committed as tests/data/demo/
#  2. one run, one folder: `stepprof run -- torchrun` (every rank in one folder, one run id),
#     plain LD_PRELOAD under `torchrun --standalone` (rendezvous id) and under plain torchrun
#     (rdzv id "none": the launcher's start time and pid), and `steps` refusing two runs
#  3. a recipe on a real loop: docs/recipes/a4s.ini on tests/gpu/mlp_train.py records steps
#     16-18 and 25-27, as torch's schedule(skip_first=10, wait=5, warmup=1, active=3, repeat=2)
#  4. torch's own schedule table, regenerated with the recipes' cases: $OUT/schedule_torch.txt
# Prints PASS/FAIL lines and "N passed, N failed"; logs and artefacts in $OUT.
set -u
R=${OUT:-/tmp/newuser-out}
mkdir -p "$R"
ROOT=$PWD
D=/tmp/spd
rm -rf "$D" && cp -r dist/stepprof "$D"
SP=$D/bin/stepprof
export PATH=/usr/local/cuda/bin:$PATH
pass=0 fail=0
check() { # check NAME COMMAND...
	local name=$1
	shift
	if "$@" >>"$R/checks.log" 2>&1; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}
runid() { "$SP" dump "$1" | head -n 20 | sed -n 's/^run_id: //p'; }
PY=${PYTHON:-python3}
LAUNCH=(torchrun)
command -v torchrun >/dev/null || LAUNCH=("$PY" -m torch.distributed.run)
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 2 ] && N=2 || N=1
nvidia-smi -L; "$SP" --version

# 1. the demo from dist alone
(cd /tmp && "$D/share/stepprof/demo.sh") >"$R/demo.log" 2>&1
check "demo from dist alone: exit 0" [ $? = 0 ]
check "demo: kernel table printed" grep -q "^Name .* Calls .* Total" "$R/demo.log"
demo=$(sed -n 's/^trace: //p' "$R/demo.log")
check "demo: trace header has a run id and the version" bash -c "'$SP' dump '$demo' | head -n 20 | grep -q '^run_id: [0-9]\{8\}-' && '$SP' dump '$demo' | head -n 20 | grep -q '^producer: stepprof '"
mkdir -p "$R/demo" && cp "$demo" "$R/demo/" 2>/dev/null

# 2. one run, one folder
W=/tmp/nuw
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
"$SP" run --ranks all -- "${LAUNCH[@]}" --standalone --nproc_per_node "$N" "$ROOT/tests/gpu/train_ddp.py" --steps 30 \
	>"$R/run1.log" 2>&1
check "stepprof run -- torchrun: exit 0" [ $? = 0 ]
check "stepprof run: one folder" [ "$(ls -d stepprof-traces/*/ | wc -l)" = 1 ]
f1=$(ls -d stepprof-traces/*/ | head -n 1)
check "stepprof run: $N rank traces in it" [ "$(ls "$f1"*.sptrace | wc -l)" = "$N" ]
check "stepprof run: one run id in every header, the folder's name" bash -c "for t in $f1*.sptrace; do [ \"\$('$SP' dump \$t | head -n 20 | sed -n 's/^run_id: //p')\" = \"\$(basename $f1)\" ] || exit 1; done"
check "stepprof run: it printed the folder" grep -q "stepprof run: run .*: stepprof-traces/" "$R/run1.log"
check "steps on the run folder" "$SP" steps "$f1"*.sptrace
sleep 1
STEPPROF_RANKS_RANKS=all LD_PRELOAD=$D/lib/libstepprof-nomalloc.so "${LAUNCH[@]}" --standalone --nproc_per_node "$N" \
	"$ROOT/tests/gpu/train_ddp.py" --steps 30 >"$R/run2.log" 2>&1
check "LD_PRELOAD + torchrun --standalone: a second folder torchrun-ID" [ "$(ls -d stepprof-traces/torchrun-*/ 2>/dev/null | wc -l)" = 1 ]
f2=$(ls -d stepprof-traces/torchrun-*/ | head -n 1)
check "--standalone: $N traces in one folder" [ "$(ls "$f2"*.sptrace | wc -l)" = "$N" ]
sleep 1
STEPPROF_RANKS_RANKS=all LD_PRELOAD=$D/lib/libstepprof-nomalloc.so "${LAUNCH[@]}" --nproc_per_node "$N" \
	--master_port 29533 "$ROOT/tests/gpu/train_ddp.py" --steps 30 >"$R/run3.log" 2>&1
check "LD_PRELOAD + plain torchrun: exit 0" [ $? = 0 ]
f3=$(ls -td stepprof-traces/*/ | head -n 1)
check "plain torchrun: $N traces in one folder DATE-TIME-HOST-PPID" bash -c "[ \$(ls $f3*.sptrace | wc -l) = $N ] && basename $f3 | grep -Eq '^[0-9]{8}-[0-9]{6}-.+-[0-9]+\$'"
"$SP" steps "$f1"*.sptrace "$f2"*.sptrace >"$R/steps-mixed.out" 2>"$R/steps-mixed.err"
check "steps across two runs: refused with exit 1" [ $? = 1 ]
check "steps across two runs: names the runs" grep -q "come from 2 different runs" "$R/steps-mixed.err"
ls -R stepprof-traces >"$R/folders.txt"

# 3. a recipe on a real loop (automatic steps)
rm -rf stepprof-traces
"$SP" run -c "$ROOT/docs/recipes/a4s.ini" -- "$PY" "$ROOT/tests/gpu/mlp_train.py" --steps 40 >"$R/a4s.log" 2>&1
check "a4s recipe: exit 0" [ $? = 0 ]
t=$(ls stepprof-traces/*/*.sptrace | head -n 1)
"$SP" report "$t" --sort self_cuda_time_total --json >"$R/a4s.json" 2>>"$R/a4s.log"
check "a4s recipe: windows are steps 16-18 and 25-27 (torch's schedule)" python3 -c '
import json, sys
w = [(x["first_step"], x["last_step"]) for x in json.load(open(sys.argv[1]))["windows"]]
assert w == [(16, 18), (25, 27)], w' "$R/a4s.json"
"$SP" report "$t" --sort self_cuda_time_total --top 10 >"$R/a4s-report.txt" 2>&1

# 4. torch's schedule table with the recipes' cases (commit as tests/data/schedule_torch.txt)
cd "$ROOT" && "$PY" tests/gpu/gen_schedule_tables.py "$R/schedule_torch.txt"
check "schedule table regenerated with real torch" grep -q "skip_first=10 skip_first_wait=0 wait=1 warmup=1 active=5 repeat=1" "$R/schedule_torch.txt"
echo "$pass passed, $fail failed"
