#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# device-batch.sh LIMIT NAME=COMMAND... - one device call that runs several GPU checks at once
# (device time is short): each COMMAND under `bash -c`, all started together, each cut at LIMIT
# seconds. Prints per check its exit status, wall time and PASS/FAIL lines, then the last lines
# of any that failed; every log goes into $OUT/batch-logs.tgz. Checks that time things share the
# GPU and CPUs with the others: their costs are upper bounds, not the quiet machine's.
set -u
LIMIT=${1:?usage: device-batch.sh LIMIT NAME=COMMAND...}
shift
W=$(mktemp -d /tmp/spbatch.XXXX)
for job in "$@"; do
	name=${job%%=*} cmd=${job#*=}
	(
		t0=$(date +%s)
		timeout "$LIMIT" bash -c "$cmd" >"$W/$name.log" 2>&1
		echo "$? $(($(date +%s) - t0))" >"$W/$name.rc"
	) &
done
wait
for job in "$@"; do
	name=${job%%=*}
	read -r rc secs <"$W/$name.rc"
	echo "== $name: exit $rc in ${secs}s"
	grep -E "^(PASS|FAIL|ok |not ok|[0-9]+ passed)|passed, [0-9]+ failed" "$W/$name.log" | cut -c1-300 | head -60
	[ "$rc" = 0 ] || tail -15 "$W/$name.log" | cut -c1-300
done
[ -n "${OUT:-}" ] && tar -C "$W" -czf "$OUT/batch-logs.tgz" .
exit 0
