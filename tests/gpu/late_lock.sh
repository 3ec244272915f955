#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# late_lock.sh BUILD_DIR - issue 33 item 5 on the GPU machine: programs whose automatic lock (or the
# proof of a regime without training evidence) comes after the default schedule's first window
# would have begun still record that window: the schedule starts from the lock (docs/STEPS.md,
# "The late start"). Each program runs twice with the default configuration (no INI: wait 10,
# warmup 1, active 3): with the automatic marker (its token stream and truth recorded, for
# tests/data/corpus) and with its truth as an explicit marker. PASS when the automatic run records
# 3 steps whose kernel counts are the marker run's (tests/gpu/corpus/compare_steps.py; or, where
# two processes pick other kernels, the auto run's own stream replayed shows them true
# iterations), and it said "the schedule starts from here". One line per program, then the
# streams in $OUT/late_corpus.tar.gz (NAME.tokens + NAME.txt, to join tests/data/corpus).
# Needs python3 with torch (and jax for jax_train). About 3 minutes on one H200.
set -u
B=$(cd "${1:?usage: late_lock.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd); cd "$ROOT" || exit 2
C=tests/gpu/corpus W=${WORK:-/tmp/late_lock} R=${OUT:-/tmp}
rm -rf "$W"; mkdir -p "$W" || exit 2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
TRUTH=api:cuGetErrorName
fail=0
while IFS='|' read -r name cmd; do
	[ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]] && continue
	d=$W/$name
	for how in auto marker; do
		o=$d/$how; mkdir -p "$o"
		env=(STEPPROF_PROFILE_OUTPUT="$o" STEPPROF_VERBOSE=1)
		[ $how = auto ] && env+=(STEPPROF_RECORD_TOKENS="$d/$name.tokens" STEPPROF_RECORD_TRUTH=$TRUTH)
		[ $how = marker ] && env+=(STEPPROF_MARKER_KIND=api STEPPROF_MARKER_PATTERN=cuGetErrorName)
		t0=$(date +%s)
		env "${env[@]}" LD_PRELOAD="$B/libstepprof.so" timeout 300 $cmd >"$o/log" 2>&1 </dev/null
		echo $? >"$o/exit"
		[ $how = auto ] && printf 'program = %s\ntruth = %s\ncommand = %s\nexit = %s\nseconds = %s\n' "$name" \
			"$TRUTH" "$cmd" "$(cat "$o/exit")" "$(($(date +%s) - t0))" >"$d/$name.txt" &&
			grep -E '^stepprof' "$o/log" | grep -v 'begins (NONE)' | head -20 >>"$d/$name.txt"
		"$B/stepprof" report --json "$o"/*.sptrace >"$o/report.json" 2>>"$o/log"
	done
	# the library's own decisions, replayed on the auto run's stream (the sparse check it runs)
	"$B/stepprof" autostep --windows --sparse 16 "$d/$name.tokens" >"$d/replay.txt" 2>&1
	echo "exit $?" >>"$d/replay.txt"
	line=$(python3 "$C/compare_steps.py" "$name" "$d/auto/report.json" "$d/marker/report.json" "$d/replay.txt")
	n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("steps", [])))' \
		"$d/auto/report.json" 2>/dev/null)
	said=$(grep -c "the schedule starts from here" "$d/auto/log")
	if [[ $line == PASS* ]] && [ "${n:-0}" = 3 ] && [ "$said" -ge 1 ] && [ "$(cat "$d/auto/exit")" = 0 ]; then
		echo "PASS late-$name: 3 steps after a late start; $line"
	else
		echo "FAIL late-$name: ${n:-0} steps, late start said $said times, exit $(cat "$d/auto/exit"); $line"
		grep -E '^stepprof' "$d/auto/log" | grep -vE 'step [0-9]+ begins \(NONE\)' | head -30
		fail=1
	fi
	grep -E "^windows" "$d/replay.txt" | cut -c1-200
done <<EOF
graphs_infer40|python3 $C/graphs_infer.py 40
graphs_infer300|python3 $C/graphs_infer.py 300
jax_train|python3 $C/jax_train.py 300
EOF
(cd "$W" && tar czf "$R/late_corpus.tar.gz" $(for n in */; do n=${n%/}; echo "$n/$n.tokens" "$n/$n.txt"; done) \
	2>/dev/null) && ls -la "$R/late_corpus.tar.gz"
exit $fail
