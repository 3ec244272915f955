#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pyops.sh - torch operators and module paths inside windows, without a GPU: the Python bridge
# turns on the stand-in torch's NVTX emission of operators (what emit_nvtx(record_shapes=True)
# turns on) and its global module hooks at the window's first step, and off after the window;
# stepprof's NVTX injection records the ranges (chaining the stand-in CUPTI's NVTX handlers) and
# `report --by op|module` reads them. tests/e2e/pybridge/ops_prog.py runs with libstepprof
# preloaded, the stand-in CUPTI, libfakenvtx.so (NVTX as libtorch_cuda calls it) and the stand-in
# torch, by Debian's python3 and every pyenv CPython 3.10-3.13 present (absent ones are named and
# skipped). Checked:
#  - every Python: the emission goes on in the optimizer hook that begins the window (iteration 10)
#    and off at the first safe point after it (iteration 14's first module call: its Optimizer.step
#    range, begun under the emission, was open at the window's end), on the program's thread; no
#    op range ends after the emission went off (torch would log a warning for each); no module hook
#    is left and torch's profiler flag is back; the ops of steps 11-13 only, their calls and
#    kernels; the module tree, backward kernels tied to their module by sequence number; the stand-
#    in CUPTI's NVTX handler saw every range (the chain);
#  - Debian's python3: a program that made a torch.profiler.profile (modules only, said why); one
#    that ran torch.compile (nothing, said); torch refusing the emission (one `stepprof:` line, the
#    program's exit status and steps unchanged, no hook left); a forward that raises inside a
#    module (always_call closes its range); [activities] ops = false (modules only) and both false
#    (nothing installed); the default's safety: NVTX_INJECTION64_PATH already set by the user (left
#    alone and said, no emission, modules only), a process that never reaches a window (no
#    emission, no hook ever installed, no NVTX call), and NVTX called before stepprof named itself
#    the injection (the emission reaches nothing: said once, not turned on again).
set -u
B=${SP_BUILD:?}
R=${SP_ROOT:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }
PROG=$R/tests/e2e/pybridge/ops_prog.py
CUPTI=$B/tests/e2e/libfakecupti.so
NVTX=$B/tests/e2e/libfakenvtx.so
SP=$B/stepprof

# shellcheck source=tests/e2e/lib/pythons.sh
. "$(dirname "$0")/lib/pythons.sh"

# run NAME PY SCENARIO [ENV...]: ops_prog.py SCENARIO ${ITERS:-16} in $T/NAME, optimizer marker, schedule
# 10,1,3,1 (window steps 11-13), extra INI lines from $EXTRA; exit status in rc
run() {
	local name=$1 py=$2 sc=$3
	shift 3
	mkdir -p "$T/$name"
	{
		printf '[profile]\noutput = %s\n[ranks]\nranks = all\n' "$T/$name/out"
		printf '[schedule]\nwait = 10\nwarmup = 1\nactive = 3\nrepeat = 1\n[marker]\nkind = optimizer\n'
		printf '[cupti]\nlibrary = %s\n' "$CUPTI"
		# ops and modules on whatever the built-in default (SP_OPS_DEFAULT), unless EXTRA sets them
		[[ ${EXTRA:-} == *'[activities]'* ]] || printf '[activities]\nops = true\nmodules = true\n'
		printf '%b' "${EXTRA:-}"
	} >"$T/$name/sp.ini"
	(cd "$T/$name" && env -u STEPPROF_VERBOSE "$@" FAKE_CUPTI_LOG="$T/$name/log" FAKE_CUPTI_NAME_KERNELS=1 \
		STEPPROF_CONFIG="$T/$name/sp.ini" FAKE_CUPTI="$CUPTI" FAKE_NVTX="$NVTX" \
		PYTHONPATH="$R/tests/e2e/pybridge" LD_PRELOAD="$PRE" timeout 60 "$py" "$PROG" "$sc" "${ITERS:-16}" \
		>"$T/$name/stdout" 2>"$T/$name/stderr")
	echo $? >"$T/$name/rc"
}

# check NAME WHAT PYTHON-ASSERTIONS: runs them on the run's stdout (out), stderr (err), fake CUPTI
# log (log), report --by op and --by module JSON (ops, mods: None without a trace)
check() {
	local name=$1 what=$2 code=$3 tr
	tr=$(ls "$T/$name"/out/*.sptrace 2>/dev/null | head -1)
	if [ -n "$tr" ]; then
		"$SP" report --json --by op "$tr" >"$T/$name/report.json" 2>"$T/$name/report.err"
	else
		echo null >"$T/$name/report.json"
	fi
	if /usr/bin/python3 - "$T/$name" "$code" >"$T/$name/check" 2>&1 <<'EOF'; then ok "$name: $what"; else
import json, sys
d = sys.argv[1]
out, err = open(d + "/stdout").read(), open(d + "/stderr").read()
log = open(d + "/log").read() if __import__("os").path.exists(d + "/log") else ""
rc = int(open(d + "/rc").read())
r = json.load(open(d + "/report.json"))
ops = {x["name"]: x for x in r["ops"]["rows"]} if r else None
mods = {x["path"]: x for x in r["modules"]["rows"]} if r else None
steps = [(s["number"], s["kernels"]) for s in r["steps"]] if r else None
line = lambda key: next((l.strip() for l in out.splitlines() if l.startswith("prog: " + key)), "")
exec(sys.argv[2])
EOF
		bad "$name: $what"
		sed 's/^/    /' "$T/$name/check" | tail -15
		sed 's/^/    stderr: /' "$T/$name/stderr" | tail -8
	fi
}

TRAIN='
assert rc == 0, rc
assert line("emission") == "prog: emission enable:MainThread:10 disable:MainThread:14", line("emission")
assert line("ranges ended after") == "prog: ranges ended after the emission went off: 0 []", line("ranges ended")
assert line("module hooks left") == "prog: module hooks left: 0" and line("profiler flag") == "prog: profiler flag: False"
assert "stepprof: torch operators" not in err, err
assert steps == [(11, 11), (12, 11), (13, 11)], steps
assert ops["aten::addmm"]["calls"] == 9 and ops["aten::addmm"]["kernels"] == 9, ops["aten::addmm"]
assert ops["aten::addmm"]["self_ns"] == 9000 and ops["aten::linear"]["total_ns"] == 9000
assert ops["aten::mm"]["calls"] == 12 and ops["aten::conv2d"]["flops"] == 3 * 2 * 8 * 32 * 32 * 3 * 3 * 3 * 16
assert ops["Optimizer.step#Opt.step"]["calls"] == 2, "the last ends after the window"
assert r["ops"]["outside_ops_ns"] == 0 and sum(o["calls"] for o in ops.values()) == 83, sum(o["calls"] for o in ops.values())
assert mods["Net.fc1"] == {"path": "Net.fc1", "calls": 3, "forward_ns": 3000, "backward_ns": 3000}, mods
assert mods["Net.blocks.b1"]["backward_ns"] == 3000 and mods["Net.conv"]["backward_ns"] == 3000, mods
assert mods["Net.Act"]["calls"] == 3 and mods["Net"]["calls"] == 3, mods
assert r["modules"]["outside_ns"] == 6000 and r["modules"]["gpu_ns"] == 33000, r["modules"]
pushes = int(line("ranges emitted").rsplit(":", 1)[1])
assert log.count("\nnvtx_push ") + log.startswith("nvtx_push ") == pushes, (pushes, log.count("nvtx_push "))
'
n=0
for py in "${PYS[@]}"; do
	v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	n=$((n + 1))
	run "train$n" "$py" train
	check "train$n" "CPython $v ($py): emission on for steps 11-13, off at a safe point; ops, modules, the chain" \
		"$TRAIN"
done

run profiler /usr/bin/python3 profiler STEPPROF_VERBOSE=1
check profiler "a program with a torch.profiler.profile: modules only, said why" '
assert rc == 0 and line("emission") == "prog: emission", line("emission")
assert "torch operators: not recorded in this window: the program made a torch.profiler.profile" in err, err
assert not ops and mods["Net.fc1"]["calls"] == 3 and line("module hooks left").endswith(": 0"), (ops, mods)
'
run compiled /usr/bin/python3 compiled STEPPROF_VERBOSE=1
check compiled "a program that ran torch.compile: no module hooks, no emission, said why" '
assert rc == 0 and line("emission") == "prog: emission" and not ops and not mods, (ops, mods)
assert err.count("torch operators: not recorded in this window: torch.compile ran") == 1, err
assert steps == [(11, 11), (12, 11), (13, 11)], steps
'
run refused /usr/bin/python3 train STANDIN_ENABLE_RAISES=1
check refused "torch refuses the emission: one line, steps and exit status unchanged, no hook left" '
assert rc == 0 and line("module hooks left").endswith(": 0") and line("profiler flag").endswith("False")
lines = [l for l in err.splitlines() if l.startswith("stepprof:")]
assert lines == ["stepprof: torch operators: turning on torch'"'"'s NVTX emission and module hooks failed "
                 "(RuntimeError: stand-in torch refuses the profiler); operators and module paths are not "
                 "recorded from now on"], lines
assert steps == [(11, 11), (12, 11), (13, 11)] and not ops and not mods, (steps, ops)
'
run raising /usr/bin/python3 raising
check raising "a forward that raises inside a module: always_call closes its range" '
assert rc == 0 and line("ranges ended after").endswith(": 0 []"), out
assert mods["Net.conv"]["calls"] == 3 and mods["Net.fc1"]["calls"] == 3, mods
assert mods["Net.conv"]["forward_ns"] == 2000, mods["Net.conv"]
'
EXTRA='[activities]\nops = false\nmodules = true\n' run modonly /usr/bin/python3 train
check modonly "[activities] ops = false: module paths only" '
assert rc == 0 and line("emission") == "prog: emission" and not ops and mods["Net.fc1"]["calls"] == 3, (ops, mods)
assert line("module hooks left").endswith(": 0")
'
EXTRA='[activities]\nops = false\nmodules = false\n' run none /usr/bin/python3 train
check none "ops and modules false: nothing installed" '
assert rc == 0 and line("emission") == "prog: emission" and not ops and not mods, (ops, mods)
assert steps == [(11, 11), (12, 11), (13, 11)], steps
'
# the default's safety: an NVTX injection of the program's own (nsys, the user's) is left alone
# and said, torch's emission stays off (it would reach that tool), module paths are still recorded
run preset /usr/bin/python3 train NVTX_INJECTION64_PATH="$B/tests/e2e/libfakeinject.so"
check preset "NVTX_INJECTION64_PATH set by the program's user: left alone and said, no emission, modules only" '
assert rc == 0 and line("nvtx injection").endswith("libfakeinject.so"), line("nvtx injection")
assert "stepprof: NVTX_INJECTION64_PATH is " in err and "libfakeinject.so: NVTX ranges and torch operators reach stepprof only if" in err, err
assert line("emission") == "prog: emission" and line("ranges emitted").endswith(": 0"), (line("emission"), line("ranges emitted"))
assert not ops and mods["Net.fc1"]["calls"] == 3 and steps == [(11, 11), (12, 11), (13, 11)], (ops, mods, steps)
'
# a process that never reaches a window: no emission, no module hook ever installed, no NVTX call
# (stepprof attaches to CUPTI only as a window comes: the injection is not even named then)
ITERS=8 run nowindow /usr/bin/python3 train
check nowindow "a process that never runs a window: no emission, no hook ever installed, no NVTX call" '
assert rc == 0 and line("emission") == "prog: emission" and line("ranges emitted").endswith(": 0"), out
assert line("module hooks ever installed").endswith(": 0"), line("module hooks ever installed")
assert line("nvtx injection").endswith((": unset", "libstepprof.so")) and "nvtx_push" not in log, (line("nvtx injection"), log[:300])
assert not ops and not mods, (ops, mods)
'
# torch's NVTX set up before stepprof named itself NVTX's injection: the emission reaches nothing;
# said once, and the emission is not turned on again (module paths still recorded)
run early /usr/bin/python3 early
check early "an emission that reaches no stepprof handler: said once, operators off, modules kept" '
assert rc == 0 and not ops and mods["Net.fc1"]["calls"] == 3, (rc, ops, mods)
assert err.count("stepprof: torch operators: torch'"'"'s NVTX ranges did not reach stepprof in a window") == 1, err
assert steps == [(11, 11), (12, 11), (13, 11)], steps
'

[ $fail = 0 ] && echo "pyops: ok" || echo "pyops: FAIL"
exit $fail
