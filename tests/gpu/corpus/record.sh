#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# record.sh BUILD_DIR MODE - the step-detection corpus on the GPU machine (one device call).
#   MODE=record: runs every program of programs.sh under the library with STEPPROF_RECORD_TOKENS
#     and STEPPROF_RECORD_TRUTH (the default configuration otherwise: auto marker) and packs the
#     token streams with each program's truth and log into $OUT/corpus.tar.gz (for tests/data/corpus).
#   MODE=check: runs every program twice, with the default configuration (auto) and with its
#     truth as an explicit marker, both recording steps SKIP+1..SKIP+3 (programs.sh; skip_first SKIP,
#     wait 0, warmup 1, active 3), and
#     compares the kernels per recorded step: PASS when auto's steps hold the same kernel counts, or
#     (a program that autotunes by timing picks other kernels in another process) when the auto
#     run's own token stream, replayed with its truth, shows every recorded step to be one true
#     iteration of the training regime with its launches (`stepprof autostep --check --windows`).
#     A program that FAILs prints the auto run's stepprof lines (STEPPROF_VERBOSE) and leaves its
#     token stream, replay, log and INI in $OUT/check/NAME/.
# ONLY=REGEX picks programs. Needs python3 with torch (and jax for jax_train), nvcc.
set -u
B=$(cd "${1:?usage: record.sh BUILD_DIR record|check}" && pwd); MODE=${2:-record}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); cd "$ROOT" || exit 2
. "$HERE/programs.sh"
W=${WORK:-/tmp/corpus}; R=${OUT:-/tmp}; rm -rf "$W"; mkdir -p "$W" || exit 2
export CORPUS_BIN=$W/bin; mkdir -p "$CORPUS_BIN"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
nvcc -O2 -arch=sm_90 -o "$CORPUS_BIN/cublas_loop" "$HERE/cublas_loop.cu" -lcublas -lcuda || echo "FAIL build cublas_loop"
[ -x .thirdparty/llm.c/train_gpt2cu ] && python3 "$HERE/llmc_data.py" "$CORPUS_BIN/llmc" >/dev/null
pass=0 fail=0
corpus_programs | while IFS='|' read -r name truth cmd skip; do
	[ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]] && continue
	d=$W/$name; mkdir -p "$d"
	if [ "$MODE" = record ]; then
		echo "== $name: $cmd"
		t0=$(date +%s)
		STEPPROF_PROFILE_OUTPUT=$d/trace STEPPROF_RECORD_TOKENS=$d/$name.tokens STEPPROF_RECORD_TRUTH=$truth \
			STEPPROF_VERBOSE=1 LD_PRELOAD=$B/libstepprof.so timeout 300 $cmd >"$d/log" 2>&1
		rc=$?; t1=$(date +%s)
		printf 'program = %s\ntruth = %s\ncommand = %s\nexit = %s\nseconds = %s\n' "$name" "$truth" "$cmd" "$rc" \
			"$((t1 - t0))" >"$d/$name.txt"
		grep -E "^stepprof" "$d/log" | head -20 >>"$d/$name.txt"
		ls -la "$d/$name.tokens"* 2>/dev/null; tail -3 "$d/log"
		"$B/stepprof" autostep "$d/$name.tokens" 2>&1 | tail -5
	else
		kind=${truth%%:*} pat=${truth#*:}
		for how in auto marker; do
			o=$d/$how; mkdir -p "$o"
			{ printf '[profile]\noutput = %s\n[schedule]\nskip_first = %s\nwait = 0\nwarmup = 1\nactive = 3\n' "$o" "${skip:-10}"
			  [ $how = marker ] && printf '[marker]\nkind = %s\npattern = %s\n' "$kind" "$pat"; } >"$o/prof.ini"
			# the auto run also records its tokens and truth (quoted: a truth pattern may hold spaces, as
			# llm.c's 'nvtx:Train step*' does); the replay of the same process's
			# stream checks its windows when kernel counts differ between processes
			rec=(); [ $how = auto ] && rec=("STEPPROF_RECORD_TOKENS=$o/auto.tokens" "STEPPROF_RECORD_TRUTH=$truth" STEPPROF_VERBOSE=1)
			env "${rec[@]}" STEPPROF_CONFIG=$o/prof.ini LD_PRELOAD=$B/libstepprof.so timeout 300 $cmd >"$o/log" 2>&1
			"$B/stepprof" report --json $o/*.sptrace >"$o/report.json" 2>>"$o/log"
		done
		"$B/stepprof" autostep --check --windows --skip-first "${skip:-10}" --wait 0 "$d/auto/auto.tokens" \
			>"$d/auto/replay.txt" 2>&1; echo "exit $?" >>"$d/auto/replay.txt"
		python3 "$HERE/compare_steps.py" "$name" "$d/auto/report.json" "$d/marker/report.json" "$d/auto/replay.txt" |
			tee "$d/compare.txt"
		# a failure shows what the library said in the auto run (its locks, steps and windows)
		# and keeps its stream, replay and log under $OUT/check/NAME (the GPU machine's run is gone after)
		if grep -q '^FAIL' "$d/compare.txt"; then
			grep -E '^stepprof' "$d/auto/log" | grep -vE 'step [0-9]+ begins \(NONE\)' | head -40
			mkdir -p "$R/check/$name" && cp "$d"/auto/auto.tokens* "$d/auto/replay.txt" "$d/auto/log" \
				"$d/auto/prof.ini" "$R/check/$name/" 2>/dev/null
		fi
	fi
done
if [ "$MODE" = record ]; then
	(cd "$W" && tar czf "$R/corpus.tar.gz" */*.tokens* */*.txt */log 2>/dev/null); ls -la "$R/corpus.tar.gz"
fi
exit 0
