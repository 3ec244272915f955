#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# readers_bounded.sh DIST - the trace readers on a window the collector really wrote: a loop of
# tiny kernels (K launches per step, NVTX range "train_step" per step, default K=100000) recorded
# for 8 steps in one window (about 2 M records), then `report`, `report --by line`, `steps`,
# `convert` and `memory` on it with their peak RSS. PASS if each stays under 64 MB: a reader that
# held the window took 200+ bytes a record (400+ MB here). The file's own disorder (CUPTI's
# activity buffers, steps and ranges written at their end) is what sizes the readers' heap; the
# lines print it as RSS. Output in ${OUT:-/tmp/stepprof-readers}. About a minute on one H200.
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
O=${OUT:-/tmp/stepprof-readers}
K=${K:-100000}
SP=$D/bin/stepprof
rm -rf "$O" && mkdir -p "$O" && cd "$O" || exit 2
[ -x /usr/bin/time ] || { echo "FAIL readers_bounded: needs /usr/bin/time (GNU time)"; exit 1; }
cat >loop.py <<'EOF'
import sys
import torch
steps, k = int(sys.argv[1]), int(sys.argv[2])
x = torch.ones(256, device="cuda")
for _ in range(steps):
    torch.cuda.nvtx.range_push("train_step")
    for _ in range(k):
        x.add_(1.0)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
print("loop ok", steps)
EOF
cat >stepprof.ini <<EOF
[profile]
enabled = true
output = $O/trace
[schedule]
wait = 1
active = 8
repeat = 1
[marker]
kind = nvtx
pattern = train_step
EOF
"$SP" check stepprof.ini >check.log 2>&1 || { cat check.log; echo "FAIL readers_bounded: check"; exit 1; }
STEPPROF_CONFIG=$O/stepprof.ini LD_PRELOAD=$D/lib/libstepprof.so python3 loop.py 11 "$K" >run.log 2>&1 ||
	{ tail -20 run.log; echo "FAIL readers_bounded: the loop"; exit 1; }
t=$(ls "$O"/trace/*.sptrace 2>/dev/null | head -1)
[ -n "$t" ] || { tail -20 run.log; echo "FAIL readers_bounded: no trace"; exit 1; }
recs=$("$SP" dump "$t" | wc -l)
echo "trace $t: $(stat -c %s "$t") bytes, about $recs records"
"$SP" report "$t" | grep '^Window'
fail=0
for cmd in "report" "report --by line" "steps" "convert -o $O/out.json.gz" "memory -o $O/out.html"; do
	set -- $cmd
	c=$1
	shift
	/usr/bin/time -f '%M %e %U' -o time.txt "$SP" "$c" "$t" "$@" >"$c.out" 2>"$c.err" ||
		{ cat "$c.err"; echo "FAIL readers_bounded: $cmd exits non-zero"; fail=1; continue; }
	read -r rss wall user <time.txt
	echo "$cmd: peak RSS $((rss / 1024)) MB ($((rss * 1024 / (recs + 1))) bytes a record), ${wall} s wall, ${user} s user"
	[ "$rss" -lt 65536 ] || { echo "FAIL readers_bounded: $cmd holds $((rss / 1024)) MB"; fail=1; }
done
[ "$fail" = 0 ] && echo "PASS readers_bounded"
exit "$fail"
