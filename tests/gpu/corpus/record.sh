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
#     iteration of the training regime with its launches (`stepprof autostep --windows --sparse 16`,
#     the sparse check the library runs for the automatic marker).
#     A program that FAILs prints the auto run's stepprof lines (STEPPROF_VERBOSE) and leaves its
#     token stream, replay, log and INI in $OUT/check/NAME/.
#   CORPUS_SKIP_MIN=N: check's skip_first is at least N for every program (N 30: the first window is
#     far enough from the lock for stepprof to detach from CUPTI before it, docs/STEPS.md).
#   CORPUS_LEARN=hooks (or auto): check's auto runs learn with [marker] learn = CORPUS_LEARN and
#     record no tokens (recording keeps CUPTI all run), so PASS needs the same kernel counts as
#     the marker run (no in-process replay); each program prints how its auto run learned.
#   A program under torchrun (`--nproc_per_node N` in its command, programs.sh) profiles every rank
#   (ranks = all): each rank records its own stream NAME.rank<R>.tokens (rankenv.sh) with its own
#   NAME.rank<R>.txt, and check compares each rank's steps (rank<R>.*.sptrace) and replays its stream
#   as corpus-NAME.rank<R>. Such programs are listed with CORPUS_GPUS=2 or more.
# check: a run that does not exit 0 FAILs its program (its segv_bt and stepprof lines shown);
# CORPUS_PRELOAD adds libraries after libstepprof.so (tests/gpu/tools/segv_bt.so for backtraces).
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
	# the ranks a torchrun program has ("" for one process): each records and is checked on its own
	ranks="" np=1; [[ $cmd =~ --nproc_per_node[=\ ]([0-9]+) ]] && np=${BASH_REMATCH[1]} && ranks=$(seq 0 $((np - 1)))
	if [ "$MODE" = record ]; then
		echo "== $name: $cmd"
		t0=$(date +%s)
		STEPPROF_PROFILE_OUTPUT=$d/trace STEPPROF_RECORD_TOKENS=$d/$name.tokens STEPPROF_RECORD_TRUTH=$truth \
			STEPPROF_RANKS_RANKS=all STEPPROF_VERBOSE=1 LD_PRELOAD=$B/libstepprof.so timeout 300 $cmd >"$d/log" 2>&1 </dev/null
		rc=$?; t1=$(date +%s)
		for r in ${ranks:-single}; do
			n=$name; [ "$r" = single ] || n=$name.rank$r
			printf 'program = %s\ntruth = %s\ncommand = %s\nexit = %s\nseconds = %s\n' "$n" "$truth" "$cmd" \
				"$rc" "$((t1 - t0))" >"$d/$n.txt"
			[ "$r" = single ] || echo "rank = $r of $np (torchrun; the log's lines are every rank's)" >>"$d/$n.txt"
			grep -E "^stepprof" "$d/log" | head -20 >>"$d/$n.txt"
			ls -la "$d/$n.tokens"* 2>/dev/null
			"$B/stepprof" autostep "$d/$n.tokens" 2>&1 | tail -5
		done
		tail -3 "$d/log"
	else
		kind=${truth%%:*} pat=${truth#*:}
		# CORPUS_SKIP_MIN: the first window no earlier than that (parks before it: docs/STEPS.md)
		[ -n "${CORPUS_SKIP_MIN:-}" ] && [ "${skip:-10}" -lt "$CORPUS_SKIP_MIN" ] && skip=$CORPUS_SKIP_MIN
		for how in auto marker; do
			o=$d/$how; mkdir -p "$o"
			{ printf '[profile]\noutput = %s\n[schedule]\nskip_first = %s\nwait = 0\nwarmup = 1\nactive = 3\n' "$o" "${skip:-10}"
			  printf '[ranks]\nranks = all\n'
			  [ $how = marker ] && printf '[marker]\nkind = %s\npattern = %s\n' "$kind" "$pat"
			  [ $how = auto ] && [ -n "${CORPUS_LEARN:-}" ] && printf '[marker]\nlearn = %s\n' "$CORPUS_LEARN"; } >"$o/prof.ini"
			# the auto run also records its tokens and truth (quoted: a truth pattern may hold spaces, as
			# llm.c's 'nvtx:Train step*' does); the replay of the same process's
			# stream checks its windows when kernel counts differ between processes
			rec=(); [ $how = auto ] && rec=("STEPPROF_RECORD_TOKENS=$o/auto.tokens" "STEPPROF_RECORD_TRUTH=$truth" STEPPROF_VERBOSE=1)
			# learning from the hooks needs no token recording (which keeps CUPTI all run): no replay then
			[ $how = auto ] && [ -n "${CORPUS_LEARN:-}" ] && rec=(STEPPROF_VERBOSE=1)
			env "${rec[@]}" STEPPROF_CONFIG=$o/prof.ini LD_PRELOAD="$B/libstepprof.so${CORPUS_PRELOAD:+ $CORPUS_PRELOAD}" \
				timeout 300 $cmd >"$o/log" 2>&1 </dev/null
			echo $? >"$o/exit"
			for r in ${ranks:-single}; do # one report per rank: its own steps and kernel counts
				tr=("$o"/*.sptrace) sfx=""; [ "$r" = single ] || { tr=("$o"/rank"$r".*.sptrace) sfx=.rank$r; }
				"$B/stepprof" report --json "${tr[@]}" >"$o/report$sfx.json" 2>>"$o/log"
			done
		done
		: >"$d/compare.txt"
		for r in ${ranks:-single}; do
			sfx=""; [ "$r" = single ] || sfx=.rank$r
			# as the library decided: the sparse check (its step numbers may drift across evaluation
			# passes, docs/STEPS.md); the windows line says whether its steps were true iterations
			rp=()
			if [ -z "${CORPUS_LEARN:-}" ]; then
				"$B/stepprof" autostep --windows --sparse 16 --skip-first "${skip:-10}" --wait 0 "$d/auto/auto$sfx.tokens" \
					>"$d/auto/replay$sfx.txt" 2>&1; echo "exit $?" >>"$d/auto/replay$sfx.txt"
				rp=("$d/auto/replay$sfx.txt")
			fi
			python3 "$HERE/compare_steps.py" "$name$sfx" "$d/auto/report$sfx.json" "$d/marker/report$sfx.json" \
				"${rp[@]}" | tee -a "$d/compare.txt"
		done
		# a run that did not exit 0 fails the program whatever its steps (a crash at exit included)
		for how in auto marker; do
			e=$(cat "$d/$how/exit"); [ "$e" = 0 ] && continue
			echo "FAIL corpus-$name: the $how run exited with $e" | tee -a "$d/compare.txt"
			grep -a -E '^segv_bt|^stepprof' "$d/$how/log" | grep -vE 'step [0-9]+ begins' | tail -40
			echo "-- the program's own last lines (a Python traceback):"; grep -av '^stepprof' "$d/$how/log" | tail -12
		done
		# CORPUS_LEARN: whether the auto run learned from the hooks, and how it handed over to CUPTI
		[ -n "${CORPUS_LEARN:-}" ] && grep -E "learn(ing|ed)? (from|with) |locked on .* while learning|launch hooks did not see|names a kernel|before the program's CUDA graph" \
			"$d/auto/log" | sed "s/^/  $name: /" | head -6
		# where the auto run detached from and re-attached to CUPTI before its first window
		[ -n "${CORPUS_LEARN:-}" ] && grep -E "detached from CUPTI in step|re-attached to CUPTI in step|not detaching from CUPTI" \
			"$d/auto/log" | sed "s/^/  $name: /" | cut -c1-220 | head -4
		# a failure shows what the library said in the auto run (its locks, steps and windows)
		# and keeps its stream, replay and log under $OUT/check/NAME (the GPU machine's run is gone after)
		if grep -q '^FAIL' "$d/compare.txt"; then
			grep -E '^stepprof' "$d/auto/log" | grep -vE 'step [0-9]+ begins \(NONE\)' | head -40
			mkdir -p "$R/check/$name" && cp "$d"/auto/auto*.tokens* "$d"/auto/replay*.txt "$d/auto/log" \
				"$d/auto/prof.ini" "$R/check/$name/" 2>/dev/null
		fi
	fi
done
if [ "$MODE" = record ]; then
	(cd "$W" && tar czf "$R/corpus.tar.gz" */*.tokens* */*.txt */log 2>/dev/null); ls -la "$R/corpus.tar.gz"
fi
exit 0
