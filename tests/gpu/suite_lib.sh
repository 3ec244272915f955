# SPDX-License-Identifier: MIT
# suite_lib.sh - what tests/gpu/run.sh and run-ddp.sh share, sourced by both: the helpers tests
# call (die, need, show) and the runner (run_suite NAME...), which runs each test t_<name> in
# its own directory $OUT/<name> with its log in test.log, prints PASS/FAIL with the log's tail,
# and ends with "N passed, N failed". Needs OUT and ONLY set by the sourcing script. REPEAT=N
# runs each test N times (a flaky test's hunt; runs after the first in $OUT/<name>.<k>), except
# tests listed in ONCE (those that build what later tests use).

die() { echo "FAILED: $*"; exit 1; }
need() { [ -e "$1" ] || die "missing $1 (made by test $2: run it first)"; }
show() { for f in "$@"; do [ -s "$f" ] && { echo "--- tail $f"; tail -n 30 "$f"; }; done; return 0; }

# run_suite NAME...: runs t_<NAME> (dashes as underscores) for each NAME matching $ONLY; returns
# 0 only if all pass.
run_suite() {
	local name dir start rc pass=0 fail=0 failed=()
	for name in "$@"; do
		[ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]] && continue
		local k times=${REPEAT:-1}
		[[ " ${ONCE:-} " == *" $name "* ]] && times=1
		for ((k = 1; k <= times; k++)); do
			dir=$OUT/$name
			[ "$k" -gt 1 ] && dir=$OUT/$name.$k
			mkdir -p "$dir"
			start=$SECONDS
			(cd "$dir" && set -o pipefail && "t_${name//-/_}") >"$dir/test.log" 2>&1
			rc=$?
			if [ $rc -eq 0 ]; then
				pass=$((pass + 1))
				echo "PASS $name ($((SECONDS - start)) s)"
			else
				fail=$((fail + 1))
				failed+=("$name")
				echo "FAIL $name ($((SECONDS - start)) s), log $dir/test.log:"
				tail -n 60 "$dir/test.log" | sed 's/^/    /'
			fi
		done
	done
	[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}

# ddp_setup NAME: what the 2-GPU scripts (run-ddp.sh, straggler.sh) do first, once BUILD, OUT and
# PY are set: LIB and SP from BUILD (both must exist); a clean environment: no inherited stepprof
# settings, preloads, CUPTI injections or allocator settings (check_memory matches torch's
# segments by address: no expandable segments), NCCL_NVLS_ENABLE=0; 2 GPUs; LAUNCH = torchrun for
# 2 processes; OUT emptied. Exits 2 (naming NAME) if a file or a GPU is missing.
ddp_setup() {
	local f v ngpu
	LIB=$BUILD/libstepprof.so
	SP=$BUILD/stepprof
	for f in "$LIB" "$SP"; do [ -e "$f" ] || { echo "missing $f: run make first"; exit 2; }; done
	for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
	unset LD_PRELOAD CUDA_INJECTION64_PATH PYTORCH_CUDA_ALLOC_CONF
	export NCCL_NVLS_ENABLE=0
	ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	[ "$ngpu" -ge 2 ] || { echo "$1 needs 2 GPUs, nvidia-smi lists $ngpu"; exit 2; }
	LAUNCH=(torchrun)
	command -v torchrun >/dev/null || LAUNCH=("$PY" -m torch.distributed.run)
	LAUNCH+=(--standalone --nproc_per_node 2)
	rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
}
