#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# share.sh [DIST] - sharing CUPTI with torch.profiler on a GPU machine (run from the repo root
# after `make dist`; DIST defaults to dist/stepprof; output under $OUT or /tmp/stepprof-share).
# Runs tests/gpu/share_torch.py (torch.profiler over steps 12-15 of 30) twice: alone, then under
# stepprof (api marker cudaDeviceSynchronize, windows of 2 steps every 6: steps 4-5, 10-11,
# 16-17, 22-23, 28-29; 10-11 and 16-17 are next to the profiler's stretch). Passes when
#  - torch.profiler's export holds the same number of kernel, cuda_runtime, gpu_memcpy and
#    gpu_memset events in both runs (cuda_driver is shown: stepprof's own thread may add some);
#  - stderr says once that stepprof serves the program's CUPTI use, and torch does not report a
#    CUPTI failure;
#  - every step of every stepprof window holds as many kernels as a step holds in torch.profiler's
#    export (the loop launches the same kernels every step after the first).
# Prints "PASS share: ..." lines and ends with "share: N passed, M failed".
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/stepprof-share}
PY=${PYTHON:-python3}
rm -rf "$O" && mkdir -p "$O"
pass=0 failn=0
ok() { echo "PASS share: $*"; pass=$((pass + 1)); }
fail() { echo "FAIL share: $*"; failn=$((failn + 1)); }

"$PY" "$HERE/share_torch.py" --json "$O/alone.json" >"$O/alone.out" 2>"$O/alone.err" ||
	{ tail -20 "$O/alone.err"; fail "the program alone exited $?"; }
printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 3\nwarmup = 1\nactive = 2\nrepeat = 0\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n' \
	"$O/trace" >"$O/stepprof.ini"
STEPPROF_VERBOSE=1 "$D/bin/stepprof" run -c "$O/stepprof.ini" -- "$PY" "$HERE/share_torch.py" --json "$O/shared.json" \
	>"$O/shared.out" 2>"$O/shared.err" || { tail -20 "$O/shared.err"; fail "the program under stepprof exited $?"; }
"$D/bin/stepprof" steps "$O"/trace/*.sptrace >"$O/steps.txt" 2>&1 || fail "stepprof steps failed: $(tail -2 "$O/steps.txt")"

"$PY" - "$O" >"$O/checks.txt" <<'PY'
import json, re, sys
o = sys.argv[1]
def counts(name):
    for l in open(f"{o}/{name}.out"):
        if l.startswith("share counts "):
            return json.loads(l[len("share counts "):])
    return None
alone, shared = counts("alone"), counts("shared")
err = open(f"{o}/shared.err", errors="replace").read()
res = []
if not alone or not shared:
    res.append((False, f"no counts line: alone {alone}, under stepprof {shared}"))
else:
    keys = ["kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset"]
    same = all(alone.get(k, 0) == shared.get(k, 0) for k in keys) and alone.get("kernel", 0) > 0
    res.append((same, "torch.profiler's CUDA events, alone vs under stepprof: " +
                ", ".join(f"{k} {alone.get(k, 0)} vs {shared.get(k, 0)}" for k in keys + ["cuda_driver"])))
    said = err.count("the program uses CUPTI itself")
    failed = "CUPTI initialization failed" in err or "MULTIPLE_SUBSCRIBERS" in err
    res.append((said == 1 and not failed, f"stderr: the sharing said {said} time(s) (want 1), torch's CUPTI failure "
                f"{'reported' if failed else 'absent'}"))
    per = alone.get("kernels_per_step", 0)
    steps = {}
    for l in open(f"{o}/steps.txt"):
        m = re.match(r"^(\d+)\s+(\d+)\s+\S+\s+(\d+)\s", l)
        if m:
            steps[int(m.group(1))] = int(m.group(3))
    # step s holds iteration s + 1 (the marker ends an iteration); 29 is the last step, begun by
    # the last iteration's synchronize: the program ends in it
    want = [4, 5, 10, 11, 16, 17, 22, 23, 28]
    short = {s: steps.get(s) for s in want if steps.get(s) != per}
    res.append((not short and per > 0, f"stepprof windows: steps {sorted(steps)}, {per:g} kernels per step expected; "
                f"{'all complete' if not short else 'short: ' + str(short)}"))
for good, msg in res:
    print(("PASS" if good else "FAIL") + " share: " + msg)
sys.exit(0 if all(g for g, _ in res) else 1)
PY
cat "$O/checks.txt"
pass=$((pass + $(grep -c '^PASS' "$O/checks.txt"))) failn=$((failn + $(grep -c '^FAIL' "$O/checks.txt")))
[ -s "$O/checks.txt" ] || fail "the checks did not run"
grep -a '^stepprof:' "$O/shared.err" | grep -v begins | head -12 | sed 's/^/  /'
echo "share: $pass passed, $failn failed (outputs in $O)"
[ $failn -eq 0 ]
