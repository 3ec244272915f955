#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/phases.sh [BUILD_DIR] - [phase.NAME] sections on a GPU: phases_prog.py (inference
# calls, NVTX "generate", interleaved with training micro-batches, NVTX "train_mb") under stepprof
# with the RL framework's layout (docs/RECIPES.md): phase fwd records every inference call as its
# own window (wait 0, warmup 0, active 1, repeat 3), phase fwd_bwd the last micro-batch of the
# first training call (wait = MICRO - 3, warmup 2, active 1). Checks:
#   - windows: 3 of fwd (steps 0, 1, 2) and 1 of fwd_bwd (step MICRO-1), each phase numbering its
#     own steps; no window skipped;
#   - per step, the kernels stepprof counted = torch.profiler's count for the same code (a run of
#     the program with --truth, without stepprof): generate, and the last micro-batch;
#   - the run itself writes a trace per phase, trace/fwd/ and trace/fwd_bwd/ (nothing beside
#     them), each holding only its phase's windows; `stepprof convert -o trace/` of each writes
#     its windows beside it (no nested phase folder), each file with that many kernel events.
# BUILD_DIR holds libstepprof.so and stepprof; without it, dist/stepprof (make dist) is laid flat
# in /tmp. Prints "PASS phases" or "FAIL phases: why"; logs and traces in ${OUT:-/tmp}/phases.
# Needs one GPU and python3 with torch.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -n "${1:-}" ]; then B=$(cd "$1" && pwd); else
	B=/tmp/spbuild-phases; rm -rf "$B"; mkdir -p "$B"
	cp "$HERE"/../../dist/stepprof/bin/stepprof "$HERE"/../../dist/stepprof/lib/* "$B/" || { echo "FAIL phases: no dist/ (make dist)"; exit 1; }
fi
SP=$B/stepprof LIB=$B/libstepprof.so PY=${PY:-python3}
W=${OUT:-/tmp}/phases; rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
ROUNDS=4 MICRO=6
fail() { echo "FAIL phases: $*"; exit 1; }

cat >stepprof.ini <<INI
[profile]
output = $W/trace
[ranks]
ranks = all
[phase.fwd]
kind = nvtx
pattern = generate
wait = 0
warmup = 0
active = 1
repeat = 3
[phase.fwd_bwd]
kind = nvtx
pattern = train_mb
wait = $((MICRO - 3))
warmup = 2
active = 1
repeat = 1
INI
"$SP" check stepprof.ini >check.log 2>&1 || fail "stepprof check: $(cat check.log)"
grep '^# phase' check.log
"$PY" "$HERE/phases_prog.py" --truth >truth.log 2>truth.err || fail "truth run: $(tail -5 truth.err)"
cat truth.log
tg=$(awk '$2 == "generate" {print $3}' truth.log) tl=$(awk '$2 == "train_last" {print $3}' truth.log)
[ -n "$tg" ] && [ -n "$tl" ] && [ "$tg" -gt 0 ] && [ "$tl" -gt 0 ] || fail "no truth counts"
STEPPROF_CONFIG=$W/stepprof.ini STEPPROF_VERBOSE=1 LD_PRELOAD=$LIB timeout 300 \
	"$PY" "$HERE/phases_prog.py" --rounds $ROUNDS --micro $MICRO >run.log 2>run.err || fail "program: $(tail -5 run.err)"
grep -q "phases ok $ROUNDS $MICRO" run.log || fail "program output: $(cat run.log)"
grep -a '^stepprof:' run.err | grep -v ' begins ' | head -20
grep -a "one window at a time" run.err && fail "a window was skipped"
ls trace/*.sptrace >/dev/null 2>&1 && fail "a trace beside the phase folders: $(ls trace/*.sptrace)"
TF=$(ls trace/fwd/*.sptrace 2>/dev/null | head -1) TB=$(ls trace/fwd_bwd/*.sptrace 2>/dev/null | head -1)
[ -n "$TF" ] && [ -n "$TB" ] || fail "no trace per phase under trace/: $(ls -R trace | tr '\n' ' ')"
[ "$(ls trace/fwd/*.sptrace | wc -l)" = 1 ] && [ "$(ls trace/fwd_bwd/*.sptrace | wc -l)" = 1 ] ||
	fail "more than one trace per phase folder: $(ls -R trace | tr '\n' ' ')"
for f in "$TF" "$TB"; do
	"$SP" dump "$f" | grep -q '^device ' || fail "$f names no GPU (not self-standing)"
done
"$SP" steps --phase fwd_bwd "$TF" >/dev/null 2>&1 && fail "trace/fwd/ holds a window of fwd_bwd"
"$SP" steps --phase fwd "$TB" >/dev/null 2>&1 && fail "trace/fwd_bwd/ holds a window of fwd"

# steps per phase: "STEP KERNELS" rows
"$SP" steps --phase fwd "$TF" >fwd.steps 2>&1 || fail "steps --phase fwd: $(cat fwd.steps)"
"$SP" steps --phase fwd_bwd "$TB" >bwd.steps 2>&1 || fail "steps --phase fwd_bwd: $(cat bwd.steps)"
cat fwd.steps bwd.steps
got_f=$(awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' fwd.steps)
got_b=$(awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' bwd.steps)
want_f="0:$tg 1:$tg 2:$tg " want_b="$((MICRO - 1)):$tl "
echo "fwd steps:kernels     $got_f(want $want_f)"
echo "fwd_bwd steps:kernels $got_b(want $want_b)"
[ "$got_f" = "$want_f" ] || fail "phase fwd: steps:kernels '$got_f', want '$want_f'"
[ "$got_b" = "$want_b" ] || fail "phase fwd_bwd: steps:kernels '$got_b', want '$want_b'"

# each phase's windows in its folder, with the same kernels
D=trace # -o DIR/: each phase's windows in DIR/PHASE/, beside its trace
"$SP" convert "$TF" -o "$D/" 2>convert.log && "$SP" convert "$TB" -o "$D/" 2>>convert.log || fail "convert: $(cat convert.log)"
cat convert.log
[ -e "$D/fwd/fwd" ] || [ -e "$D/fwd_bwd/fwd_bwd" ] && fail "convert nested a phase folder"
nf=$(ls "$D"/fwd/*.pt.trace.json.gz 2>/dev/null | wc -l) nb=$(ls "$D"/fwd_bwd/*.pt.trace.json.gz 2>/dev/null | wc -l)
[ "$nf" = 3 ] && [ "$nb" = 1 ] || fail "folders: fwd/ holds $nf files (want 3), fwd_bwd/ $nb (want 1)"
"$PY" - "$D" "$tg" "$tl" <<'PY' || fail "kernel events in the converted files differ"
import gzip, json, glob, sys
d, tg, tl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ok = True
for sub, want in (("fwd", tg), ("fwd_bwd", tl)):
    for f in sorted(glob.glob(f"{d}/{sub}/*.pt.trace.json.gz")):
        n = sum(1 for e in json.load(gzip.open(f))["traceEvents"] if e.get("cat") == "kernel")
        print(f"{sub}/{f.rsplit('/', 1)[1]}: {n} kernels (want {want})")
        ok &= n == want
sys.exit(not ok)
PY
echo "PASS phases"
