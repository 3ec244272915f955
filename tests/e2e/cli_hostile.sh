#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_hostile.sh - every reading command on hand-made hostile traces (tests/e2e/gen_hostile.c):
# sparse ids at the top of their range, ids past it, string and event bombs, a chunk claiming
# 2^32 records or 1 GiB, 200,000 thread records, module records naming a FIFO, /dev/zero, a
# terminal and a directory. Each command must exit 0 or 1 within 20 s and (outside sanitizer
# builds) under 1 GiB of address space, and must not open the FIFO (it would hang). The refusals
# must say why. (The fuzz harness's regression inputs run in tests/e2e/fuzz.sh.)
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
SEED=hostile
# shellcheck source=tests/e2e/lib/checked.sh
. "$R/tests/e2e/lib/checked.sh"

mkfifo "$T/fifo"
"$B/tests/e2e/gen_hostile" "$T" "$T/fifo" || fail "gen_hostile"
cd "$T"
# 1 GiB of address space, unless a sanitizer runtime is linked in (it reserves terabytes)
limit=
ldd "$B/stepprof" | grep -q 'libasan\|libtsan' || limit="ulimit -v 1048576;"

# each NAME.sptrace FN...: runs every reading command on NAME.sptrace; sets $fails to the number
# that exited 1
each() {
	local t=$1 c
	fails=0
	for c in "dump" "report" "report --json" "report --window 0 --no-symbols" "stacks --kind all" \
		"stacks --no-symbols" "memory -o m.html" "steps" "convert -o c.json" "convert --merge -o m.json" \
		"diff $t"; do
		# shellcheck disable=SC2086
		if ! run_checked "$c $t" "0 1" timeout 20 bash -c "$limit exec \"\$@\"" - "$B/stepprof" ${c%% *} "$t" \
			$( [ "$c" = "${c#* }" ] || echo "${c#* }" ); then
			fails=$((fails + 1))
		fi
	done
}

# refused NAME PATTERN: every command refuses NAME.sptrace, saying PATTERN
refused() {
	each "$1.sptrace"
	[ "$fails" -ge 10 ] || fail "$1: only $fails of 11 commands refused it"
	run_checked "dump $1" "1" "$B/stepprof" dump "$1.sptrace" || true
	grep -q "$2" err.txt || fail "$1: the refusal does not say '$2': $(cat err.txt)"
}

refused bigstack 'stack id 2147483648 out of range'
refused count 'claims 4294967295 records'
refused rsize 'claims 1073741824 raw bytes (limit'
refused longstring 'raw bytes (limit'
refused strbomb 'decompression bomb'
refused evbomb 'decompression bomb'

# read in full: every command exits 0 (steps and diff need steps: there are)
for t in ids threads windows paths; do
	each "$t.sptrace"
	[ "$fails" -eq 0 ] || fail "$t: $fails commands failed"
done
run_checked "report ids" "0" "$B/stepprof" report ids.sptrace --top 3
grep -q 'kernel_name_' out.txt || fail "report ids: no kernel names: $(cat out.txt)"
run_checked "dump paths" "0" "$B/stepprof" dump paths.sptrace
grep -q "name=\"$T/fifo\"" out.txt || fail "dump paths: no module record naming the FIFO"

echo "ok   hostile traces: 10 hand-made, every reading command"


# outputs: a link planted at the output name (or at the old predictable NAME.tmp) is replaced,
# never followed; the file it points to is untouched
echo precious >victim.txt
ln -s victim.txt res.json.tmp
ln -s victim.txt fold.txt
ln -s victim.txt page.html
run_checked "convert over a link" "0" "$B/stepprof" convert paths.sptrace --merge -o res.json
run_checked "stacks over a link" "0" "$B/stepprof" stacks paths.sptrace -o fold.txt --kind all
run_checked "memory over a link" "0" "$B/stepprof" memory paths.sptrace -o page.html --no-symbols
[ "$(cat victim.txt)" = precious ] || fail "an output followed a planted link"
[ ! -L fold.txt ] && [ ! -L page.html ] && [ -f res.json ] || fail "an output is still a link"
ls res.* fold.* page.* | grep -E "\.[A-Za-z0-9]{6}$" 2>/dev/null && fail "temporary files left behind"
echo "ok   outputs never follow a planted link"
