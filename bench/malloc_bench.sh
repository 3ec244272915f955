#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/malloc_bench.sh BUILD_DIR - what host-allocation tracking and call stacks cost, on the GPU
# machine: builds bench/malloc_bench.c and runs it, interleaved over ROUNDS rounds (rotated order):
#   baseline     no stepprof
#   baseline-again  no stepprof, a second time: its ratio to baseline is the machine's noise
#   host-off     stepprof loaded, host_malloc = false
#   host-on      host_malloc = true
#   host-stacks  host_malloc = true, stacks = true
# The stepprof runs share one window (marker api cuCtxSynchronize*, skip_first SKIP, warmup 1,
# active ACTIVE) that covers the measured steps SKIP+3 .. SKIP+ACTIVE-2. Prints a markdown table
# (also ${OUT:-/tmp/stepprof-malloc}/malloc_bench.md; raw data in malloc_bench.json): median step
# time per round, median over rounds of the ratio to that round's baseline, recorded host
# allocation events per step (from `stepprof dump`), and the stack capture cost per event =
# (host-stacks - host-on) / events per step. Targets (issue 4): host-on <= 1.05x, host-off <= 1.01x.
# Paired, in one process (malloc_bench's PAIRED mode: blocks of 6 steps take turns between the
# hooked allocator functions and libc's own, so that a machine whose speed drifts from one process
# to the next cannot blur a few percent): paired-none (no stepprof: the pairing's own noise),
# paired-off (host_malloc = false), paired-on (host_malloc = true), paired-nohooks (host_malloc =
# false with libstepprof-nomalloc.so, what `stepprof run` preloads then), PACTIVE (120) steps in a window;
# their ratio is the median over rounds of (hooked steps / libc steps).
# Settings: ROUNDS (5), OPS (20000 malloc/free pairs per step), SKIP (5), ACTIVE (60), LARGE (per
# mille of blocks >= 64 KiB, the tracked ones: 50; a sweep of it gives the cost per tracked event),
# ONLY (a space-separated subset of the configurations, e.g. "paired-none paired-on"), CPUS (pin every
# run to these CPUs with taskset, e.g. 2-5: less noise from migrations), and CMP: another
# build dir (e.g. the last commit's) whose library runs as two more configurations, cmp-host-off and
# cmp-host-on, interleaved with the rest, so that a change is measured against it in one call.
set -u
BUILD=$(cd "${1:?usage: bench/malloc_bench.sh BUILD_DIR}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/stepprof-malloc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
ROUNDS=${ROUNDS:-5}
OPS=${OPS:-20000}
SKIP=${SKIP:-5}
ACTIVE=${ACTIVE:-60}
PACTIVE=${PACTIVE:-120}
STEPS=$((SKIP + 1 + ACTIVE + 5))
PSTEPS=$((SKIP + 1 + PACTIVE + 5))
CMP=${CMP:+$(cd "$CMP" && pwd)}
CONFIGS=(baseline baseline-again host-off host-on host-stacks ${CMP:+cmp-host-off cmp-host-on} paired-none paired-off paired-on paired-nohooks)
if [ -n "${ONLY:-}" ]; then
	for c in $ONLY; do [[ " ${CONFIGS[*]} " == *" $c "* ]] || { echo "ONLY: unknown configuration $c"; exit 2; }; done
	read -r -a CONFIGS <<<"$ONLY"
fi
export MIX_LARGE_PERMILLE=${LARGE:-50}
PIN=()
[ -n "${CPUS:-}" ] && PIN=(taskset -c "$CPUS")
for f in "$BUILD/libstepprof.so" "$BUILD/libstepprof-nomalloc.so" "$BUILD/stepprof" ${CMP:+"$CMP/libstepprof.so"}; do [ -e "$f" ] || { echo "missing $f: run make first"; exit 2; }; done
[ "$ACTIVE" -ge 10 ] || { echo "ACTIVE must be >= 10"; exit 2; }
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
export NCCL_NVLS_ENABLE=0
rm -rf "$OUT" && mkdir -p "$OUT/runs" || exit 2
BIN=$OUT/malloc_bench
gcc -std=gnu11 -O2 -Wall -I"$CUDA_HOME/include" "$HERE/malloc_bench.c" -o "$BIN" -L"$CUDA_HOME/lib64/stubs" -lcuda ||
	{ echo "malloc_bench: cannot build malloc_bench.c"; exit 1; }
"$BIN" 2 100 >"$OUT/sanity.log" 2>&1 || { cat "$OUT/sanity.log"; echo "malloc_bench does not run without stepprof"; exit 1; }

# ini CONFIG: writes and checks $OUT/CONFIG.ini
ini() {
	local f=$OUT/$1.ini host=false stacks=false active=$ACTIVE
	case ${1#cmp-} in host-on | paired-on) host=true ;; host-stacks) host=true stacks=true ;; esac
	[ "${1#paired-}" != "$1" ] && active=$PACTIVE
	{
		printf '[profile]\nenabled = true\noutput = trace\n' # relative: each run's own directory
		printf '[schedule]\nskip_first = %s\nwait = 0\nwarmup = 1\nactive = %s\nrepeat = 1\n' "$SKIP" "$active"
		printf '[marker]\nkind = api\npattern = cuCtxSynchronize*\n'
		printf '[activities]\nhost_malloc = %s\nstacks = %s\n' "$host" "$stacks"
		# ring: room for many steps' events between writer passes; CUPTI buffers of a size the
		# program never allocates, so that one recorded as the program's (a defect) is seen
		printf '[limits]\nring_events = 256K\ncupti_buffer_bytes = 3M\n'
	} >"$f"
	"$BUILD/stepprof" check "$f" >"$OUT/$1.check.log" 2>&1 || { cat "$OUT/$1.check.log"; echo "stepprof check $f failed"; exit 1; }
}
for c in "${CONFIGS[@]}"; do case $c in baseline* | paired-none) ;; *) ini "$c" ;; esac; done

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "malloc_bench: $ROUNDS rounds, $STEPS steps of $OPS operations ($MIX_LARGE_PERMILLE per mille >= 64 KiB), window steps $((SKIP + 1))..$((SKIP + ACTIVE))"
for ((r = 0; r < ROUNDS; r++)); do
	for ((k = 0; k < ${#CONFIGS[@]}; k++)); do
		c=${CONFIGS[$(((k + r) % ${#CONFIGS[@]}))]}
		d=$OUT/runs/$c-r$r
		mkdir -p "$d"
		args=("$STEPS" "$OPS")
		[ "${c#paired-}" != "$c" ] && args=("$PSTEPS" "$OPS" 4096 1)
		if [ "${c%-again}" = baseline ] || [ "$c" = paired-none ]; then
			(cd "$d" && timeout 300 "${PIN[@]}" "$BIN" "${args[@]}" >stdout.log 2>stderr.log)
		else
			lib=$BUILD/libstepprof.so
			[ "${c#cmp-}" != "$c" ] && lib=$CMP/libstepprof.so
			[ "$c" = paired-nohooks ] && lib=$BUILD/libstepprof-nomalloc.so
			(cd "$d" && STEPPROF_CONFIG=$OUT/$c.ini LD_PRELOAD=$lib \
				timeout 300 "${PIN[@]}" "$BIN" "${args[@]}" >stdout.log 2>stderr.log)
		fi
		rc=$?
		med=$(sed -n 's/^malloc_bench ok .*median_us=\([0-9.]*\).*/\1/p' "$d/stdout.log")
		echo "round $r $c: exit $rc, median ${med:-?} us"
		if [ $rc -ne 0 ] || [ -z "$med" ]; then
			tail -5 "$d/stderr.log"
			[ "$c" = baseline ] && { echo "malloc_bench: the baseline run fails, stopping"; exit 1; }
			continue
		fi
		t=$(find "$d/trace" -name '*.sptrace' 2>/dev/null | head -1)
		[ -n "$t" ] && { "$BUILD/stepprof" dump "$t" >"$d/dump.txt" 2>"$d/dump.err" || tail -3 "$d/dump.err"; }
	done
done

"$PY" - "$OUT" "$SKIP" "$ACTIVE" "$ROUNDS" "$OPS" "$HERE/../tests/gpu" "${CONFIGS[*]}" "$PACTIVE" <<'PY'
import json, os, statistics, sys
out, gpu_dir = sys.argv[1], sys.argv[6]
skip, active, rounds, ops = (int(x) for x in sys.argv[2:6])
sys.path.insert(0, gpu_dir)
sys.path.insert(0, os.path.join(gpu_dir, "..", "..", "bench"))
import dumputil as du
from bench import quartile1

configs = sys.argv[7].split()
pactive = int(sys.argv[8])
targets = {"host-off": 1.01, "host-on": 1.05, "cmp-host-off": 1.01, "cmp-host-on": 1.05,
           "paired-off": 1.01, "paired-on": 1.05, "paired-nohooks": 1.01}
runs, problems = {}, []
for c in configs:
    paired = c.startswith("paired-")
    first, last = skip + 3, skip + (pactive if paired else active) - 2  # measured steps (0-based)
    for r in range(rounds):
        d = os.path.join(out, "runs", f"{c}-r{r}")
        rec = {"config": c, "round": r}
        try:
            lines = open(os.path.join(d, "stdout.log")).read().splitlines()
            t = [float(x) for x in next(l for l in lines if l.startswith("step_us ")).split()[1:]]
            if paired:  # hooked steps against libc's, each turn's first step left out
                via = [int(x) for x in next(l for l in lines if l.startswith("step_libc ")).split()[1:]]
                own = [t[i] for i in range(first, last + 1) if not via[i] and via[i - 1] == via[i]]
                libc = [t[i] for i in range(first, last + 1) if via[i] and via[i - 1] == via[i]]
                rec["median_us"] = statistics.median(own)
                rec["libc_us"] = statistics.median(libc)
                rec["paired_ratio"] = rec["median_us"] / rec["libc_us"]
            else:
                rec["median_us"] = statistics.median(t[first:last + 1])
        except (OSError, StopIteration, ValueError, IndexError, statistics.StatisticsError):
            problems.append(f"{c} round {r}: no step times (see {d})")
            continue
        runs[(c, r)] = rec
        if c.startswith("baseline") or c == "paired-none":
            continue
        if not os.path.exists(os.path.join(d, "dump.txt")):
            problems.append(f"{c} round {r}: no trace written (stepprof inactive? see {d}/stderr.log)")
            continue
        try:
            dump = du.load(os.path.join(d, "dump.txt"))
            steps = dump.steps()
        except du.DumpError as e:
            problems.append(f"{c} round {r}: {e}")
            continue
        measured = {n: s for n, s in steps.items() if first <= n <= last}
        if len(measured) != last - first + 1:
            problems.append(f"{c} round {r}: the window recorded steps {min(steps, default='-')}.."
                            f"{max(steps, default='-')}, not all of {first}..{last}")
        host = [x for x in dump.of("alloc", "free") if x.text("mem") == "host"
                and not (x.has("flags") and x.text("flags") != "-")
                and not (x.kind == "alloc" and x.int("addr") == 0 and x.int("size") == 0)
                and du.step_of(measured, x.start) is not None]
        rec["events_per_step"] = len(host) / max(len(measured), 1)
        own = [x for x in dump.of("alloc") if x.text("mem") == "host" and x.int("size", 0) == 3 << 20]
        if own:
            problems.append(f"{c} round {r}: {len(own)} of stepprof's own CUPTI buffers recorded as the program's host memory")
        allocs = [x for x in host if x.kind == "alloc"]  # a free has a stack only if its allocation was recorded
        frees = len(host) - len(allocs)
        if allocs and frees < 0.9 * len(allocs) and not paired:  # paired: libc's steps free unseen  # each step frees about as many tracked blocks as it makes
            problems.append(f"{c} round {r}: {frees} frees for {len(allocs)} allocations: the free filter misses recorded blocks")
        rec["with_stack"] = sum(1 for x in allocs if x.int("stack", 0))
        rec["dropped"] = sum(x.int("dropped", 0) for x in dump.of("window_end"))
        if (c.endswith("-off") or c == "paired-nohooks") and host:
            problems.append(f"{c} round {r}: {len(host)} host events recorded with host_malloc = false")
        if not (c.endswith("-off") or c == "paired-nohooks") and not host:
            problems.append(f"{c} round {r}: no host allocation event recorded")
        if c == "host-stacks" and rec["with_stack"] < len(allocs):
            problems.append(f"{c} round {r}: {len(allocs) - rec['with_stack']} of {len(allocs)} allocations have no stack")

base = {r: runs[("baseline", r)]["median_us"] for r in range(rounds) if ("baseline", r) in runs}



q_base = quartile1(base.values())
rows, summary = [], {}
for c in configs:
    recs = [runs[(c, r)] for r in range(rounds) if (c, r) in runs]
    if c.startswith("paired-"):
        ratios = [x["paired_ratio"] for x in recs]
    else:
        ratios = [x["median_us"] / base[x["round"]] for x in recs if x["round"] in base]
    ratio = statistics.median(ratios) if ratios else None
    evs = [x["events_per_step"] for x in recs if "events_per_step" in x]
    ev = statistics.median(evs) if evs else None
    drops = sum(x.get("dropped", 0) for x in recs)
    tgt = targets.get(c)
    verdict = "" if tgt is None or ratio is None else ("meets" if ratio <= tgt else "MISSES")
    q = quartile1([x["median_us"] for x in recs])
    q_ratio = q / q_base if q and q_base and not c.startswith("paired-") else None
    summary[c] = {"median_us": [x["median_us"] for x in recs], "ratio": ratio, "ratios": ratios, "q1_ratio": q_ratio,
                  "events_per_step": ev, "dropped": drops, "target": tgt, "verdict": verdict}
    rows.append(f"| {c} | {', '.join(f'{x:.0f}' for x in summary[c]['median_us']) or 'FAILED'} | "
                f"{'' if ratio is None else f'{ratio:.3f}x'} | {'' if q_ratio is None else f'{q_ratio:.3f}x'} | "
                f"{'' if ev is None else f'{ev:.0f}'} | "
                f"{drops if c != 'baseline' else ''} | {'' if tgt is None else f'<= {tgt}x'} {verdict} |")
costs = []
for r in range(rounds):
    on, st = runs.get(("host-on", r)), runs.get(("host-stacks", r))
    if on and st and st.get("events_per_step"):
        costs.append((st["median_us"] - on["median_us"]) * 1e3 / st["events_per_step"])
cost = statistics.median(costs) if costs else None
gpu = os.popen("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null").read().strip().splitlines()
md = ["# stepprof malloc benchmark", "",
      f"GPU {gpu[0] if gpu else '?'}; {rounds} rounds; {skip + 1 + active + 5} steps of "
      f"{ops} malloc/free pairs ({int(os.environ.get('MIX_LARGE_PERMILLE', 50)) / 10:g}% >= 64 KiB: the recorded ones); medians of steps "
      f"{skip + 3}..{skip + active - 2} (all inside the window; paired runs: {skip + 1 + pactive + 5} steps, "
      f"{skip + 3}..{skip + pactive - 2}).", "",
      "| config | median us/step per round | vs baseline (median of per-round ratios) | vs baseline (lower quartiles) "
      "| host events/step recorded | dropped (all rounds) | target, verdict |",
      "|---|---|---|---|---|---|---|", *rows, "",
      "paired-* rows: in one process, steps through the allocator functions the program sees (stepprof's hooks; "
      "none in paired-nohooks, which preloads libstepprof-nomalloc.so) against steps calling libc directly "
      f"(blocks of 6, {pactive} steps in the window); their ratio column is the median over rounds of "
      "hooked / libc, and paired-none (no stepprof) is that pairing's own noise.",
      *[f"- {c} per-round ratios: {', '.join(f'{x:.3f}' for x in summary[c]['ratios'])}"
        for c in configs if c.startswith("paired-")], "",
      "Call-stack capture cost: " + ("not measured" if cost is None else
                                     f"{cost:.0f} ns per recorded allocation event (median over rounds of "
                                     "(host-stacks - host-on) / events per step)")]
if problems:
    md += ["", "Problems:", *[f"- {p}" for p in problems]]
text = "\n".join(md) + "\n"
print("\n" + text)
open(os.path.join(out, "malloc_bench.md"), "w").write(text)
json.dump({"summary": summary, "stack_ns_per_event": cost, "runs": [dict(v) for v in runs.values()],
           "problems": problems}, open(os.path.join(out, "malloc_bench.json"), "w"), indent=1)
sys.exit(1 if problems else 0)
PY
