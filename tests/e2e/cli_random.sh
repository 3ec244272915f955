#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_random.sh - every reading command of `stepprof` on traces of random but well-formed records
# (tests/e2e/gen_random.c: any kind, sub code, device, payload, times running backwards, steps and
# windows in any order, unknown names and stacks). Each command must exit 0 or 1 (never crash or
# hang), say nothing of a sanitizer (SAN builds), and a JSON or HTML file it reports as written
# must be complete; cut, bit-flipped and random-byte files are refused or read as far as they are
# whole, never crash. RANDOM_TRACES (default 24) and RANDOM_SEED (default 1) pick the traces.
# Exits non-zero on the first failure, naming the command and the seed.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
N=${RANDOM_TRACES:-24} SEED=${RANDOM_SEED:-1}
# shellcheck source=tests/e2e/lib/checked.sh
. "$R/tests/e2e/lib/checked.sh"

"$B/tests/e2e/gen_random" "$T/r" "$N" "$SEED" || fail "gen_random $T/r $N $SEED"
cd "$T"

# run NAME CMD...: CMD may exit 0 (done) or 1 (refused); its exit code is returned
run() {
	local name=$1
	shift
	run_checked "$name" "0 1" "$@"
}

# json_ok FILE...: each parses as JSON (gzip or not)
json_ok() {
	python3 - "$@" <<'PY' || fail "invalid JSON written (seed $SEED): $*"
import gzip, json, sys
for f in sys.argv[1:]:
    with (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) as fh:
        json.load(fh)
PY
}

read_ok=0
prev=
for t in r*.sptrace; do
	if run dump "$B/stepprof" dump "$t"; then read_ok=$((read_ok + 1)); fi
	run report "$B/stepprof" report "$t" || true
	if run report-json "$B/stepprof" report "$t" --json; then json_ok out.txt; fi
	run report-sort "$B/stepprof" report "$t" --sort calls --top 3 --window 1 || true
	run report-ops "$B/stepprof" report "$t" --by op --shapes --sort flops || true
	if run report-modules "$B/stepprof" report "$t" --by module --json; then json_ok out.txt; fi
	rm -f c.*json*
	if run convert "$B/stepprof" convert "$t" -o c.json; then
		ls c*.json >/dev/null 2>&1 && json_ok c*.json
	fi
	if run convert-merge "$B/stepprof" convert "$t" --merge -o m.json.gz; then json_ok m.json.gz; fi
	rm -f s.*json*
	if run convert-steps "$B/stepprof" convert "$t" --steps 3-9 -o s.json; then
		ls s*.json >/dev/null 2>&1 && json_ok s*.json
	fi
	if run memory "$B/stepprof" memory "$t" -o mem.html; then
		[ ! -e mem.html ] || grep -q '</html>' mem.html || fail "memory: mem.html incomplete (seed $SEED)"
	fi
	run stacks "$B/stepprof" stacks "$t" --kind all -o stacks.txt || true
	run stacks-calls "$B/stepprof" stacks "$t" --by calls || true
	run steps "$B/stepprof" steps "$t" || true
	if [ -n "$prev" ]; then
		run steps-2 "$B/stepprof" steps "$prev" "$t" || true
		if run steps-json "$B/stepprof" steps --json "$prev" "$t"; then json_ok out.txt; fi
		run report-peers "$B/stepprof" report "$t" --peers "$prev" || true
		run diff "$B/stepprof" diff "$prev" "$t" || true
	fi
	prev=$t
done
# damaged copies: cut anywhere, a byte changed anywhere (header included), or no trace at all;
# the reading commands must refuse them or read what is whole, never crash
python3 - "$SEED" r*.sptrace <<'PY'
import random, sys
rnd = random.Random(int(sys.argv[1]))
for k, f in enumerate(sys.argv[2:8]):
    data = open(f, "rb").read()
    open("cut%d.sptrace" % k, "wb").write(data[:rnd.randrange(len(data) + 1)])
    b = bytearray(data)
    for _ in range(rnd.choice([1, 1, 4])):
        i = rnd.randrange(min(len(b), 600)) if rnd.random() < 0.5 else rnd.randrange(len(b))
        b[i] ^= 1 << rnd.randrange(8)
    open("flip%d.sptrace" % k, "wb").write(bytes(b))
open("noise.sptrace", "wb").write(bytes(rnd.randrange(256) for _ in range(5000)))
open("empty.sptrace", "wb").write(b"")
PY
for t in cut*.sptrace flip*.sptrace noise.sptrace empty.sptrace; do
	run dump-damaged "$B/stepprof" dump "$t" || true
	run report-damaged "$B/stepprof" report "$t" || true
	rm -f d.*json*
	run convert-damaged "$B/stepprof" convert "$t" -o d.json || true
	run memory-damaged "$B/stepprof" memory "$t" -o d.html || true
	run steps-damaged "$B/stepprof" steps "$t" || true
done

# the traces are well formed: the reader must accept them (a guard against a generator that only
# exercises the error path)
[ "$read_ok" -eq "$N" ] || fail "stepprof dump read $read_ok of $N random traces"
echo "ok   $N random traces, every reading command (seed $SEED)"
