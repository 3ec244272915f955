#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_cut.sh - traces a cut run leaves (written by gen_cut): a window without its WINDOW_END is
# "cut at step S" (S its last step) in report, report --json, steps, steps --json, convert's lines,
# its JSON metadata and its marker; windows whose BEGIN the writer held back when the file was cut
# keep their own steps (found from the steps' actions) instead of being swallowed by the cut
# window; a trace whose records lie outside every window says so. Exits non-zero on the first failure.
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T"
for m in held crash nobegin quiet; do "$B/tests/e2e/gen_cut" $m $m.sptrace || fail "gen_cut $m"; done

# held: window 1 ends with its RECORD_AND_SAVE step 5; steps 6-8 and 9 are windows 2 and 3
"$B/stepprof" report held.sptrace >r.txt 2>r.err || fail "report held: $(cat r.err)"
grep -q '^Window 1: steps 3-5 (3 steps), .* (incomplete: cut at step 5)$' r.txt || fail "window 1: $(grep ^Window r.txt)"
grep -q '^Window 2 (its beginning is not in the trace: found from its steps): steps 6-8 (3 steps), .*6 kernels.*(incomplete: cut at step 8)$' r.txt ||
	fail "window 2: $(grep ^Window r.txt)"
grep -q '^Window 3 (its beginning is not in the trace: found from its steps): steps 9-9 (1 step),' r.txt ||
	fail "window 3: $(grep ^Window r.txt)"
grep -q '^Window 0: steps 0-2 (3 steps), .*GPU busy 40.0%$' r.txt || fail "window 0 (whole): $(grep ^Window r.txt)"
"$B/stepprof" report --json held.sptrace >r.json || fail "report --json"
python3 - r.json <<'EOF' || fail "report --json windows"
import json, sys
w = json.load(open(sys.argv[1]))["windows"]
got = [(x["id"], x["first_step"], x["last_step"], x["complete"], x["cut_at_step"], x["inferred"], x["steps"]) for x in w]
want = [(0, 0, 2, True, None, False, 3), (1, 3, 5, False, 5, False, 3), (2, 6, 8, False, 8, True, 3), (3, 9, 9, False, 9, True, 1)]
assert got == want, got
EOF

# steps: every step in its own window; the cut is said (exit 0), and in --json
"$B/stepprof" steps held.sptrace >s.txt 2>s.err || fail "steps held exits $?: $(cat s.err)"
grep -q 'note: held.sptrace was cut short: window 3 has no window end (cut at step 9)' s.err || fail "steps note: $(cat s.err)"
awk '$1 ~ /^[0-9]+$/ {print $1, $2}' s.txt | tr '\n' ' ' | grep -q '^0 0 1 0 2 0 3 1 4 1 5 1 6 2 7 2 8 2 9 3 $' ||
	fail "steps by window: $(cat s.txt)"
"$B/stepprof" steps --json held.sptrace >s.json 2>/dev/null || fail "steps --json"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["traces"][0]; assert t["cut"] == {"window": 3, "at_step": 9}, t["cut"]' s.json ||
	fail "steps --json cut"

# convert: each window its file, its line, its metadata and its marker
"$B/stepprof" convert held.sptrace -o c.json 2>c.err || fail "convert held: $(cat c.err)"
grep -q '^wrote c.1.pt.trace.json: window 1, steps 3-5, .* events (incomplete: cut at step 5)$' c.err || fail "convert line: $(cat c.err)"
grep -q '^wrote c.2.pt.trace.json: window 2 (its beginning is not in the trace: found from its steps), steps 6-8, ' c.err ||
	fail "convert line 2: $(cat c.err)"
python3 - c.2.pt.trace.json <<'EOF' || fail "convert metadata"
import json, sys
d = json.load(open(sys.argv[1]))
w = d["otherData"]["windows"][0]
assert (w["complete"], w["cut_at_step"], w["inferred"], w["first_step"], w["last_step"]) == (False, 8, True, 6, 8), w
names = [e["name"] for e in d["traceEvents"] if e.get("ph") == "i"]
assert "window 2 (incomplete): cut at step 8" in names, names
EOF

# crash: the window open at the crash is cut at its last whole step
"$B/stepprof" report crash.sptrace >r.txt || fail "report crash"
grep -q '^Window 0: steps 0-1 (2 steps), .* (incomplete: cut at step 1)$' r.txt || fail "crash: $(grep ^Window r.txt)"
"$B/stepprof" steps crash.sptrace >/dev/null 2>s.err || fail "steps crash"
grep -q 'window 0 has no window end (cut at step 1)' s.err || fail "steps crash note: $(cat s.err)"

# a window whose BEGIN is not in the file is found from its steps: never "holds no recorded window"
"$B/stepprof" report nobegin.sptrace >r.txt 2>r.err || fail "report nobegin: $(cat r.err)"
grep -q '^Window 0 (its beginning is not in the trace: found from its steps): steps 4-5 (2 steps),' r.txt ||
	fail "nobegin: $(cat r.txt r.err)"
if "$B/stepprof" report quiet.sptrace >/dev/null 2>r.err; then fail "quiet: report exits 0"; fi
grep -q 'quiet.sptrace holds 4 records, none in a window' r.err || fail "quiet: $(cat r.err)"
echo "cli_cut: ok"
