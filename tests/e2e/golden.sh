#!/usr/bin/env bash
# golden.sh - the trace format against a committed trace: tests/golden/small.sptrace (written by
# gen_golden) must dump to small.expected; re-running gen_golden must give the same bytes (the
# writer is deterministic); the records written by older versions (small-v1, small-v4, small-v5)
# still read; --relative, a cut copy, a corrupt copy and bad usage behave.
set -u
G=$SP_ROOT/tests/golden
DUMP=$SP_BUILD/stepprof
GEN=$SP_BUILD/tests/e2e/gen_golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME COMMAND...: runs the command, reports ok/FAIL
	local name=$1
	shift
	if "$@" >"$tmp/check.out" 2>&1; then echo "ok   $name"; else
		echo "FAIL $name"
		cat "$tmp/check.out"
		fails=$((fails + 1))
	fi
}

"$DUMP" dump "$G/small-v1.sptrace" >"$tmp/v1.out"
check "a version-1 trace still reads (small-v1.expected)" diff -u "$G/small-v1.expected" "$tmp/v1.out"
"$DUMP" dump "$G/small-v4.sptrace" >"$tmp/v4.out"
check "a version-4 trace still reads (small-v4.expected: marker records without op fields)" \
	diff -u "$G/small-v4.expected" "$tmp/v4.out"
"$DUMP" dump "$G/small-v5.sptrace" >"$tmp/v5.out"
check "a version-5 trace still reads (small-v5.expected: columns, marker records without op fields)" \
	diff -u "$G/small-v5.expected" "$tmp/v5.out"
check "version 4 and 5 hold the same records" diff -u <(tail -n +3 "$G/small-v4.expected") <(tail -n +3 "$G/small-v5.expected")
"$DUMP" dump "$G/small.sptrace" >"$tmp/small.out"
check "dump exits 0" test $? -eq 0
check "dump matches small.expected" diff -u "$G/small.expected" "$tmp/small.out"

"$GEN" "$tmp/a.sptrace" && "$GEN" "$tmp/b.sptrace"
check "gen_golden runs" test -s "$tmp/a.sptrace" -a -s "$tmp/b.sptrace"
check "two gen_golden runs are byte-identical" cmp "$tmp/a.sptrace" "$tmp/b.sptrace"
if [ "$("$GEN" --zstd-version)" = "$(cat "$G/small.zstd-version")" ]; then
	check "gen_golden reproduces the committed trace byte for byte" cmp "$G/small.sptrace" "$tmp/a.sptrace"
else # another zstd may compress differently: the records must still be the same
	echo "note: zstd $("$GEN" --zstd-version), committed with $(cat "$G/small.zstd-version"): comparing decoded records only"
	"$DUMP" dump "$tmp/a.sptrace" >"$tmp/a.out"
	check "regenerated trace decodes to small.expected" diff -u "$G/small.expected" "$tmp/a.out"
fi

"$DUMP" dump --relative "$G/small.sptrace" >"$tmp/rel.out"
check "--relative: kernel 6000 ns after the anchor" grep -q '^kernel dev=0 stream=7 ctx=1 start=6000 dur=2500 corr=10 ' "$tmp/rel.out"
check "--relative: clock realtime relative" grep -q '^clock start=120100 realtime=120150$' "$tmp/rel.out"
check "--relative: same record count" test "$(wc -l <"$tmp/rel.out")" -eq "$(wc -l <"$G/small.expected")"

# a copy cut inside its last chunk: the whole chunks, then "# truncated", exit 0
size=$(stat -c %s "$G/small.sptrace")
head -c $((size - 7)) "$G/small.sptrace" >"$tmp/cut.sptrace"
"$DUMP" dump "$tmp/cut.sptrace" >"$tmp/cut.out"
check "cut file exits 0" test $? -eq 0
{ head -n -2 "$G/small.expected"; echo "# truncated"; } >"$tmp/cut.expected"
check "cut file prints the whole chunks then # truncated" diff -u "$tmp/cut.expected" "$tmp/cut.out"

# a flipped byte in the last chunk's frame: records before it, then exit 1 with a message
cp "$G/small.sptrace" "$tmp/bad.sptrace"
python3 - "$tmp/bad.sptrace" "$((size - 5))" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a]))
PY
"$DUMP" dump "$tmp/bad.sptrace" >"$tmp/bad.out" 2>"$tmp/bad.err"
check "corrupt chunk exits 1" test $? -eq 1
check "corrupt chunk is named on stderr" grep -q 'stepprof dump: .*corrupt chunk' "$tmp/bad.err"
check "records before the corrupt chunk are printed" diff -u <(head -n -2 "$G/small.expected") "$tmp/bad.out"

"$DUMP" dump >/dev/null 2>&1
check "no TRACE: exit 2" test $? -eq 2
"$DUMP" dump --bogus "$G/small.sptrace" >/dev/null 2>&1
check "unknown option: exit 2" test $? -eq 2
"$DUMP" dump "$tmp/missing.sptrace" >/dev/null 2>&1
check "missing file: exit 1" test $? -eq 1
printf 'not a trace at all' >"$tmp/junk"
"$DUMP" dump "$tmp/junk" 2>"$tmp/junk.err" >/dev/null
check "not a trace: exit 1" test $? -eq 1
check "not a trace: says so" grep -q 'not a stepprof trace' "$tmp/junk.err"

[ "$fails" -eq 0 ] && echo "golden: ok"
[ "$fails" -eq 0 ]
