#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pybridge.sh - the Python bridge (collector/pybridge/) and the steps it brings, without a GPU:
# tests/e2e/pybridge/prog.py, a "PyTorch program" on a stand-in torch package (tests/e2e/pybridge/
# torch: the optimizer's global post hooks, GradScaler), run with libstepprof preloaded and the
# stand-in CUPTI, by Debian's python3 and every pyenv CPython 3.10-3.13 present (those absent are
# named and skipped). Checked with `stepprof report --json` (step numbers and kernels per step):
#  - every Python: an optimizer marker (one optimizer); no reference held and nothing allocated per
#    optimizer step, scaler update or marked call; python markers on a function, a method
#    and a staticmethod (a wrapper on 3.10/3.11 that keeps the annotations, sys.monitoring's
#    PY_START on 3.12+), and on a module imported lazily (not loaded by a poll); the default
#    configuration leaves sys.monitoring's tool ids to the program (3.12+); the hook goes in only
#    after torch.optim.optimizer's import has finished (the stand-in sleeps halfway through it);
#    an import that raises, then succeeds; a fork after the install (the child writes nothing);
#    a program that never imports torch (nothing said, torch still not imported); the hook's
#    registration raising, torch calling the hook with no argument or with keywords only (one
#    line each, the program's exit status unchanged); CPython embedded in a C program that lives on after
#    Py_FinalizeEx: the interpreter finalising while a poll waits between its check and the GIL,
#    with and without the atexit module, CPython initialised after CUDA, CPython initialised twice
#    (no crash; the second interpreter is not polled). Once: a free-threading CPython whose
#    version string does not say so (tests/e2e/pyfake) is refused.
#  - Debian's python3 (and a 3.12+ one for the scaler's wrapper): a GAN, a WGAN, gradient
#    accumulation, a GradScaler loop with skipped steps, an evaluation pass inside a step (report
#    names it), the default configuration taking the optimizer steps (no launch hook after the
#    switch: the stand-in driver is asked no kernel name), parking between windows (CUPTI attached
#    for the windows only), and a token recording replayed by `stepprof autostep`.
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
PROG=$R/tests/e2e/pybridge/prog.py
CUPTI=$B/tests/e2e/libfakecupti.so
CUDA=$B/tests/e2e/fakecuda/libcuda.so.1

# shellcheck source=tests/e2e/lib/pythons.sh
. "$(dirname "$0")/lib/pythons.sh"
minor() { "$1" -c 'import sys; print(sys.version_info[1])'; }

# run NAME PY KIND PATTERN SCENARIO ITERS [ENV...]: prog.py in $T/NAME (schedule SCHED="wait,warmup,
# active,repeat", 10,1,3,1 unless set; STEPPROF_VERBOSE unless QUIET is set); exit status in rc
run() {
	local name=$1 py=$2 kind=$3 pat=$4 sc=$5 n=$6 wa wu ac rp verbose=STEPPROF_VERBOSE=1
	shift 6
	[ -n "${QUIET:-}" ] && verbose=SP_QUIET=1
	IFS=, read -r wa wu ac rp <<<"${SCHED:-10,1,3,1}"
	mkdir -p "$T/$name"
	{
		printf '[profile]\noutput = %s\n[ranks]\nranks = all\n' "$T/$name/out"
		printf '[schedule]\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n' "$wa" "$wu" "$ac" "$rp"
		printf '[marker]\nkind = %s\n' "$kind"
		[ -n "$pat" ] && printf 'pattern = %s\n' "$pat"
		printf '[cupti]\nlibrary = %s\n' "$CUPTI"
	} >"$T/$name/sp.ini"
	(cd "$T/$name" && env -u STEPPROF_VERBOSE "$verbose" "$@" FAKE_CUPTI_LOG="$T/$name/log" \
		FAKE_CUPTI_NAME_KERNELS=1 STEPPROF_CONFIG="$T/$name/sp.ini" FAKE_CUPTI="$CUPTI" \
		PYTHONPATH="$R/tests/e2e/pybridge" LD_PRELOAD="$PRE" timeout 60 "$py" "$PROG" "$sc" "$n" \
		>"$T/$name/stdout" 2>"$T/$name/stderr")
	echo $? >"$T/$name/rc"
}

# steps NAME: "NUMBER:KERNELS ..." of the recorded steps (report --json), or the error
steps() {
	"$B/stepprof" report --json "$T/$1"/out/*.sptrace 2>&1 |
		/usr/bin/python3 -c 'import json,sys
try:
    r = json.load(sys.stdin)
except Exception as e:
    print("no report:", e); sys.exit()
print(" ".join("%d:%d" % (s["number"], s["kernels"]) for s in r["steps"]))'
}

# expect NAME WANT_STEPS [RC]: the steps and the exit status
expect() {
	local got rc
	got=$(steps "$1")
	rc=$(cat "$T/$1/rc")
	if [ "$got" != "$2" ] || [ "$rc" != "${3:-0}" ]; then
		bad "$1: steps '$got' (expected '$2'), exit $rc (expected ${3:-0})"
		sed 's/^/    /' "$T/$1/stderr" | grep -v begins | tail -8
		return 1
	fi
}

for py in "${PYS[@]}"; do
	m=$(minor "$py")
	v=3.$m$([ "$py" = /usr/bin/python3 ] && echo -debian)
	[ "$m" -ge 10 ] && [ "$m" -le 13 ] || { echo "skip $py: CPython 3.$m"; continue; }
	how=$([ "$m" -ge 12 ] && echo "sys.monitoring PY_START" || echo "a wrapper")

	run "opt$v" "$py" optimizer "" one 30
	expect "opt$v" "11:7 12:7 13:7" && grep -q "torch's global optimizer post hook is in" "$T/opt$v/stderr" &&
		! grep -q "Optimizer.__init__" "$T/opt$v/stderr" &&
		ok "$v: optimizer marker: steps 11-13 of 7 kernels (the optimizer's step() ends each; Optimizer.__init__ left alone)" ||
		bad "$v: opt: $(grep -c 'Optimizer.__init__' "$T/opt$v/stderr") lines about Optimizer.__init__"

	run "fn$v" "$py" python __main__:train_step fn 30 WAIT=fn
	expect "fn$v" "11:7 12:7 13:7" && grep -q "watching __main__:train_step ($how)" "$T/fn$v/stderr" &&
		grep -q "type hints of train_step: {'opt': <class 'object'>, 'return': <class 'NoneType'>}" "$T/fn$v/stdout" &&
		ok "$v: python marker on a function ($how; typing.get_type_hints sees its annotations)" ||
		bad "$v: fn: $(grep hints "$T/fn$v/stdout")"
	run "method$v" "$py" python __main__:Trainer.training_step method 30 WAIT=method
	expect "method$v" "11:7 12:7 13:7" && grep -q "watching __main__:Trainer.training_step ($how)" "$T/method$v/stderr" &&
		ok "$v: python marker on a method ($how)"
	run "static$v" "$py" python __main__:Trainer.static_step static 30 WAIT=static
	expect "static$v" "11:7 12:7 13:7" && grep -q "watching __main__:Trainer.static_step ($how)" "$T/static$v/stderr" &&
		ok "$v: python marker on a staticmethod ($how)"

	# a module imported with importlib's LazyLoader: the bridge reads module and class dicts only,
	# so the module's body runs when and where the program first touches it, not in a poll
	run "lazy$v" "$py" python lazymod:lazy_step lazy 30 WAIT=lazy
	expect "lazy$v" "11:7 12:7 13:7" && grep -q "lazymod still lazy after the polls: True" "$T/lazy$v/stdout" &&
		grep -q "lazymod loaded on the main thread: True" "$T/lazy$v/stdout" &&
		ok "$v: python marker in a lazily imported module: left alone until the program loaded it" ||
		bad "$v: lazy: $(grep lazymod "$T/lazy$v/stdout")"

	# the default configuration takes no sys.monitoring tool id (GradScaler.update gets a wrapper):
	# a program that takes ids 3 and 4 itself once the bridge's watches are in goes on
	if [ "$m" -ge 12 ]; then
		run "tools$v" "$py" auto "" tools 30 WAIT=optimizer,scaler
		expect "tools$v" "11:7 12:7 13:7" && grep -q "tool ids 3 and 4 taken by the program: True" "$T/tools$v/stdout" &&
			ok "$v: default configuration: the program takes sys.monitoring tool ids 3 and 4 after the install"
	fi

	# no reference held and nothing allocated per event: 20000 optimizer steps, scaler updates and
	# marked calls (the optimizer hook and the scaler's wrapper; the python marker's PY_START or
	# wrapper) leave the reference counts of None, the optimizer and the scaler and the memory
	# tracemalloc sees as they were
	for c in "auto - optimizer,scaler" "python __main__:marked marked"; do
		read -r kind pat w <<<"$c"
		run "leak$kind$v" "$py" "$kind" "${pat#-}" leak 20000 WAIT="$w"
		line=$(grep "leak:" "$T/leak$kind$v/stdout")
		if [ "$(cat "$T/leak$kind$v/rc")" = 0 ] && echo "$line" | grep -q "None +0, optimizer +0, scaler +0 references" &&
			[ "$(echo "$line" | sed -n 's/.*; +\{0,1\}\(-\{0,1\}[0-9]*\) bytes traced/\1/p')" -lt 4096 ]; then
			ok "$v: nothing held or allocated per event ($kind: $(echo "$line" | cut -d: -f3-))"
		else
			bad "$v: leak ($kind): exit $(cat "$T/leak$kind$v/rc"), '$line'"
		fi
	done

	# the stand-in's torch.optim.optimizer sleeps halfway through its import: the bridge polls
	# meanwhile and must not register into the half-initialised module
	run "slow$v" "$py" optimizer "" one 30 STANDIN_SLOW_IMPORT=0.6
	expect "slow$v" "11:7 12:7 13:7" && grep -q "registered_while_importing = False" "$T/slow$v/stdout" &&
		ok "$v: the hook goes in only after torch.optim.optimizer's import finished" ||
		bad "$v: slow import: $(grep registered "$T/slow$v/stdout")"

	run "raises$v" "$py" optimizer "" one 30 STANDIN_IMPORT_RAISES=1 STANDIN_SLOW_IMPORT=0.3
	expect "raises$v" "11:7 12:7 13:7" && grep -q "import failed" "$T/raises$v/stdout" &&
		ok "$v: a torch import that raises, then succeeds: the hook goes into the module that stayed"

	run "fork$v" "$py" optimizer "" fork 30
	files=$(ls "$T/fork$v/out" | wc -l)
	expect "fork$v" "11:7 12:7 13:7" && grep -q "child status 0" "$T/fork$v/stdout" && [ "$files" = 1 ] &&
		ok "$v: fork after the install: the child's 20 steps count nowhere, it writes nothing" ||
		bad "$v: fork: $files trace files, $(grep child "$T/fork$v/stdout")"

	QUIET=1 run "notorch$v" "$py" auto "" notorch 300 # (polled meanwhile: 100 ms a poll)
	if [ "$(cat "$T/notorch$v/rc")" = 0 ] && [ ! -s "$T/notorch$v/stderr" ] &&
		grep -q "torch imported: False" "$T/notorch$v/stdout"; then
		ok "$v: a program that never imports torch: nothing said, torch never imported"
	else
		bad "$v: notorch: exit $(cat "$T/notorch$v/rc"), $(grep torch "$T/notorch$v/stdout"), stderr: $(head -3 "$T/notorch$v/stderr")"
	fi

	# a Python exception in the registration, a hook torch calls wrongly: one line, the bridge
	# off, the program's exit status its own
	for c in "REGISTER_RAISES registering torch's optimizer post hook failed (RuntimeError: stand-in torch refuses hooks)" \
		"BAD_HOOK_CALL the optimizer post hook failed (torch called it without the optimizer)" \
		"KW_HOOK_CALL the optimizer post hook failed (torch called it without the optimizer)"; do
		line=${c#* } c=${c%% *}
		# (the registration is tried at the bridge's first poll, 100 ms in: the loop lasts longer)
		QUIET=1 run "$c$v" "$py" auto "" one 200 STANDIN_$c=1 WAIT=$([ $c != REGISTER_RAISES ] && echo optimizer) EXIT_CODE=5
		n=$(grep -c '^stepprof:' "$T/$c$v/stderr")
		if [ "$(cat "$T/$c$v/rc")" = 5 ] && [ "$n" = 1 ] && grep -q "prog: done" "$T/$c$v/stdout" &&
			grep -qF "stepprof: Python bridge: $line; it is off" "$T/$c$v/stderr"; then
			ok "$v: $c: one line ($(cut -c1-90 "$T/$c$v/stderr")...), the program's exit status kept"
		else
			bad "$v: $c: exit $(cat "$T/$c$v/rc"), $n lines: $(head -3 "$T/$c$v/stderr")"
		fi
	done

	# CPython embedded in a C program that lives on after Py_FinalizeEx: a poll waits between its
	# check and the GIL while the interpreter finalises, with the atexit module there and without
	# it (nothing Python-level then tells the bridge); CPython initialised after CUDA; CPython
	# initialised twice (the second interpreter is not polled with the first one's objects)
	lib=$("$py" -c "import sysconfig, os; print(os.path.join(sysconfig.get_config_var('LIBDIR'), sysconfig.get_config_var('INSTSONAME')))")
	if [ -f "$lib" ]; then
		for e in "atexit DELAY atexit callback: True" "noexit DELAY atexit, threading imported:" \
			"late CUDA_FIRST round 1 optimizer hook in: True" "twice TWICE round 2 optimizer hook in: False"; do
			read -r mode knob want <<<"$e"
			mkdir -p "$T/embed$mode$v"
			(cd "$T/embed$mode$v" && env EMBED_MODE=$mode PYTHONPATH="$R/tests/e2e/pybridge" \
				PYTHONHOME=$("$py" -c 'import sys; print(sys.prefix)') STEPPROF_CUPTI_LIBRARY="$CUPTI" \
				$([ "$knob" = DELAY ] && echo STEPPROF_TEST_PYBRIDGE_DELAY_US=800000) \
				$([ "$knob" != DELAY ] && echo PYEMBED_CUDA_FIRST=1) $([ "$knob" = TWICE ] && echo PYEMBED_TWICE=1) \
				LD_PRELOAD="$PRE" timeout 30 "$B/tests/e2e/pyembed" "$lib" "$R/tests/e2e/pybridge/embed.py" >stdout 2>stderr)
			rc=$?
			if [ "$rc" = 0 ] && grep -q "$want" "$T/embed$mode$v/stdout" && grep -q "exiting 0" "$T/embed$mode$v/stderr"; then
				ok "$v: embedded CPython, $mode: '$want', no crash after Py_FinalizeEx"
			else
				bad "$v: embedded, $mode: exit $rc: $(cat "$T/embed$mode$v/stdout") $(tail -3 "$T/embed$mode$v/stderr")"
			fi
		done
	else
		echo "skip $v embedded: no $lib"
	fi
done

# a process that looks like CPython but is a free-threading build (its refcount functions say so,
# not its version string): refused, said once with an explicit marker, nothing else called
mkdir -p "$T/pyfake"
printf '[marker]\nkind = optimizer\n[cupti]\nlibrary = %s\n' "$CUPTI" >"$T/pyfake/sp.ini"
(cd "$T/pyfake" && STEPPROF_CONFIG="$T/pyfake/sp.ini" LD_PRELOAD="$PRE" timeout 30 "$B/tests/e2e/pyfake" >stdout 2>stderr)
rc=$?
[ "$rc" = 0 ] && grep -q "a free-threading build (the bridge relies on the GIL)" "$T/pyfake/stderr" &&
	! grep -q "_Py_DecRefShared called" "$T/pyfake/stderr" &&
	ok "a free-threading CPython whose version string does not say so: refused by its symbols" ||
	bad "pyfake: exit $rc: $(head -3 "$T/pyfake/stderr")"

# ---- the steps of the other loops (Debian's python3; the scaler under a 3.12+ too) ----
PY=/usr/bin/python3
for sc in "gan 11:8 12:8 13:8" "wgan 11:18 12:18 13:18" "accum 11:17 12:17 13:17"; do
	set -- $sc
	run "$1" "$PY" optimizer "" "$1" 30
	expect "$1" "$2 $3 $4" && ok "optimizer steps of a $1 loop: one step per iteration ($2 $3 $4)"
done
grep -q "ends when Adam#2's step() returns .*a cycle of 2 optimizer steps of 2 optimizers" "$T/gan/stderr" ||
	bad "gan: no rule line naming Adam#2"
grep -q "a cycle of 6 optimizer steps of 2 optimizers" "$T/wgan/stderr" || bad "wgan: no cycle of 6"
PY12=$(for p in "${PYS[@]}"; do [ "$(minor "$p")" -ge 12 ] && echo "$p" && break; done)
for py in "$PY" $PY12; do
	v=3.$(minor "$py")
	run "scaler$v" "$py" optimizer "" scaler 30 SKIP=0,1,11,12 WAIT=optimizer,scaler
	expect "scaler$v" "11:6 12:6 13:7" && grep -q "GradScaler#1's update() begins" "$T/scaler$v/stderr" &&
		ok "$v: GradScaler with skipped steps (0, 1, 11, 12): each iteration one step, ended by update()"
done

run eval "$PY" optimizer "" eval 30
expect eval "11:7 12:37 13:7" &&
	"$B/stepprof" report "$T/eval"/out/*.sptrace | grep -q "Step 12 holds an evaluation pass (30 kernels without backward)" &&
	ok "an evaluation pass between two optimizer steps stays in its step, and report names it" ||
	bad "eval: $("$B/stepprof" report "$T/eval"/out/*.sptrace | grep -i evaluation)"

# the default configuration ([marker] kind = auto): the program's optimizer steps once the hook
# fired, numbered from its install; the launch hooks learn until then and never after (the stand-in
# driver is asked a kernel's name only for the 7 launches of the first iteration)
# an optimizer step inside a CUDA graph capture (torch.cuda.graph with a capturable optimizer): the
# graph's replays never call the hook, so the default gives the optimizer steps up and finds the
# replayed steps from the launches (it recorded nothing before: 4 optimizer steps, then silence)
run captured "$PY" auto "" captured 40
c=$(steps captured)
grep -q "the program's optimizer step ran inside a CUDA graph capture" "$T/captured/stderr" &&
	[ "$(echo "$c" | wc -w)" = 3 ] && ! echo "$c" | tr " " "\n" | grep -qv ":5$" &&
	ok "default configuration, an optimizer step captured into a graph: automatic steps again, 3 steps of the 5 replayed kernels ($c)" ||
	bad "captured: steps '$c'; $(grep -v begins "$T/captured/stderr" | tail -5)"
# an RL loop (rl_phases.py on a GPU): the optimizer is made before a rollout of 40 tokens (a loop of
# 5 launches and a sync, no training kernel) and steps after it; the default waits for that step
# (Optimizer.__init__ watched) and records 3 whole iterations, not the rollout's token steps (before:
# the rollout's loop counted after 26 tokens, its window began before the first optimizer step)
run rollout "$PY" auto "" rollout 20 WAIT=optimizer,made STEPPROF_MARKER_LEARN=cupti
expect rollout "11:205 12:205 13:205" && grep -q "the program made a torch optimizer" "$T/rollout/stderr" &&
	grep -q "made a torch optimizer that has not stepped yet" "$T/rollout/stderr" &&
	ok "default configuration, an RL loop's rollout before the first optimizer step: 3 iterations of 205 kernels, the rollout's steps held" ||
	bad "rollout: $(steps rollout); $(grep -v begins "$T/rollout/stderr" | grep -iE 'optimizer|automatic' | head -4)"
# the optimizer made before the bridge's first poll: found by torch's mark on its class's step()
run rollout_early "$PY" auto "" rollout 20 WAIT=optimizer,made STEPPROF_MARKER_LEARN=cupti MADE_EARLY=1
expect rollout_early "11:205 12:205 13:205" && grep -q "the program made a torch optimizer (step" "$T/rollout_early/stderr" &&
	ok "default configuration, the optimizer made before the bridge watched: found all the same, 3 iterations of 205 kernels" ||
	bad "rollout_early: $(steps rollout_early); $(grep -v begins "$T/rollout_early/stderr" | grep -iE 'optimizer|automatic' | head -4)"
# CUDA not initialised (a CPU program): the bridge never asks (asking would start CUDA)
run captured_cpu "$PY" auto "" captured 40 STANDIN_CUDA_UNINIT=1
grep -q "prog: capture checks 0" "$T/captured_cpu/stdout" && ! grep -q "inside a CUDA graph capture" "$T/captured_cpu/stderr" &&
	ok "CUDA not initialised: torch.cuda.is_current_stream_capturing is never called" ||
	bad "captured_cpu: $(grep 'capture checks' "$T/captured_cpu/stdout")"
run default "$PY" auto "" gan 30 FAKE_CUDA="$CUDA"
expect default "11:8 12:8 13:8" &&
	"$B/stepprof" report --json "$T/default"/out/*.sptrace | grep -q '"steps_found_by":"found by the program.s optimizer steps (torch.optim.s global post hook; kind = auto took them' &&
	grep -q "fakecuda: 3 kernel name lookups" "$T/default/stdout" &&
	ok "default configuration: the optimizer steps (report says kind = auto took them); no launch hook after the switch" ||
	bad "default: $(grep fakecuda "$T/default/stdout"); $("$B/stepprof" report --json "$T/default"/out/*.sptrace | grep steps_found_by)"

# parked between windows: CUPTI attached only around the two windows (11-12, 24-25), its callbacks
# seeing the launches of the warmup and recorded steps only (6 steps of 7); steps of 20 ms, so that
# the writer's ticks (every 2 ms, 100 ms while parked, woken 2 steps before a window) fall in time
SCHED=10,1,2,2 run parked "$PY" optimizer "" one 35 STEP_MS=20
subs=$(grep -c '^subscribe' "$T/parked/log")
fins=$(grep -c '^finalize' "$T/parked/log")
expect parked "11:7 12:7 24:7 25:7" && [ "$subs" = 2 ] && [ "$fins" = 2 ] &&
	grep -q "stepprof's callbacks saw 42 launches" "$T/parked/stdout" &&
	grep -q "re-attached to CUPTI in step 2[12] for the next window" "$T/parked/stderr" &&
	ok "parked: subscribed twice (once a window, from 2 steps before it), CUPTI saw the 42 launches of windows and warmups only" ||
	bad "parked: $subs subscriptions, $fins finalisations, $(grep saw "$T/parked/stdout")"

# the same with a CUDA graph replayed each iteration through the runtime's hooked cudaGraphLaunch
# (torch.compile reduce-overhead training with an eager optimizer): the optimizer step ends the window
# at the next call, yet the kinds stay on until the park turns them off with graph launches held, so
# it parks as without graphs and no graph replays with the kinds off before a finalise (before: the
# kinds went off at once, stepprof stayed subscribed for the rest of the run)
SCHED=10,1,2,2 run gparked "$PY" optimizer "" one 35 STEP_MS=20 FAKERT="$B/tests/e2e/libfakecudart.so" FAKE_CUPTI_ONE_CORR=1
subs=$(grep -c '^subscribe' "$T/gparked/log")
fins=$(grep -c '^finalize' "$T/gparked/log")
expect gparked "11:7 12:7 24:7 25:7" && [ "$subs" = 2 ] && [ "$fins" = 2 ] &&
	! grep -qE 'GRAPH_FINALIZE_HAZARD|FINALIZE_UNDER_CALL' "$T/gparked/log" &&
	ok "parked with CUDA graphs replayed through the hooks: subscribed twice, no replay with the kinds off before a finalise" ||
	bad "gparked: $subs subscriptions, $fins finalisations; $(grep -E 'HAZARD|UNDER_CALL' "$T/gparked/log" | head -2); $(grep -v begins "$T/gparked/stderr" | grep -i 'graph\|detach' | head -3)"

# phases on two python markers (an RL loop: generate, then the training step), no NVTX in the
# program: each phase's window holds its own function's work
mkdir -p "$T/rl"
printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[cupti]\nlibrary = %s\n' "$T/rl/out" "$CUPTI" >"$T/rl/sp.ini"
printf '[phase.gen]\nkind = python\npattern = __main__:generate\nwait = 0\nwarmup = 0\nactive = 1\n' >>"$T/rl/sp.ini"
printf '[phase.train]\nkind = python\npattern = __main__:rl_train\nwait = 3\nwarmup = 1\nactive = 1\n' >>"$T/rl/sp.ini"
(cd "$T/rl" && STEPPROF_CONFIG="$T/rl/sp.ini" FAKE_CUPTI="$CUPTI" FAKE_CUPTI_NAME_KERNELS=1 WAIT=rl \
	PYTHONPATH="$R/tests/e2e/pybridge" LD_PRELOAD="$PRE" timeout 60 "$PY" "$PROG" rl 10 >stdout 2>stderr)
g=$("$B/stepprof" report --json "$T/rl"/out/gen/*.sptrace 2>&1 | /usr/bin/python3 -c 'import json,sys; print(" ".join("%d:%d" % (s["number"], s["kernels"]) for s in json.load(sys.stdin)["steps"]))' 2>&1)
t=$("$B/stepprof" report --json "$T/rl"/out/train/*.sptrace 2>&1 | /usr/bin/python3 -c 'import json,sys; print(" ".join("%d:%d" % (s["number"], s["kernels"]) for s in json.load(sys.stdin)["steps"]))' 2>&1)
[ "$g" = "0:10" ] && [ "$t" = "4:5" ] &&
	ok "phases on python markers (RL: generate 0:10, training step 4:5), no NVTX in the program" ||
	bad "rl phases: gen '$g' (expected 0:10), train '$t' (expected 4:5): $(tail -3 "$T/rl/stderr")"

# the bridge's events in a token recording, replayed
run tokens "$PY" auto "" gan 30 STEPPROF_RECORD_TOKENS="$T/tokens/run.tokens"
out=$("$B/stepprof" autostep "$T/tokens/run.tokens" 2>&1)
if echo "$out" | grep -q "the program's optimizer steps from here (kind = auto)" &&
	echo "$out" | grep -q "summary: 30 steps" && echo "$out" | grep -q "optim *60"; then
	ok "token recording: pyhook and optim tokens; stepprof autostep replays the switch and 30 steps"
else
	bad "tokens: $(echo "$out" | head -12)"
fi
exit $fail
