#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# graph_fin_matrix.sh - which CUPTI state makes a CUDA graph fail after cuptiFinalize (issue 37.1):
# on the GPU machine, from anywhere, one call (about 1-2 minutes). Builds graph_fin_probe.cu and
# cupti_shim.c, then runs one process per cell, J (6) at a time, each with a 30 s timeout:
#   part 1  activity kinds at the capture (none K KM KMS all gt win) x callbacks (none launch domains
#           resource graph sp) x graph (k: kernels; t: memset, copy, cuBLAS, kernels), captured and
#           instantiated while attached, detached after everything finished, the same graph replayed
#   part 2  the lifecycle: made before the attach / captured before and instantiated after / both
#           while attached x detach after a sync / with 200 replays in flight / while the program
#           replays x after it the same executable graph / re-instantiated / updated, with KM kinds
#           on at the capture and in a window after it (C=sp, G=t)
#   part 3  cudaGraphInstantiateFlagAutoFreeOnLaunch (as torch instantiates), and the baselines
#           without CUPTI (C=off)
#   sanitizer  a few cells under compute-sanitizer --tool memcheck, if it is there and runs
#   torch   torch_graph_probe.py with the shim: torch.cuda.graph inference and training captures
#           and torch.compile(mode="reduce-overhead") under stepprof-like and heavier CUPTI states,
#           detached after a sync or while replaying, then replayed, re-instantiated or re-captured;
#           each checksum is compared with the same cell's run without CUPTI
# One line per cell: "OK|FAIL|SETUP|TIMEOUT|CRASH cell detail"; then the FAIL lines again, the counts
# and the time. Work in ${WORK:-/tmp/graph_fin} (the probe, the shim, cells/*.log); only two files go
# to ${OUT:-/tmp}: graph_fin-matrix.txt (the lines) and graph_fin-matrix.tgz (the lines, the torch
# checksums, the build log and every cell's log), so that the GPU machine's 8 returned files suffice.
# Settings: J (6), CUDA_HOME, PYTHON, TORCH=0 (leave out the torch cells), SANITIZER=0, ONLY=REGEX
# (the cells whose line matches, e.g. 'G=t,A=win' or '^T .*train').
# Exit 0 when no cell FAILed, TIMED OUT or CRASHed, else 1; 2 when the probe does not build.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
O=${WORK:-/tmp/graph_fin}
R=${OUT:-/tmp}
PY=${PYTHON:-python3}
J=${J:-6}
C=${CUDA_HOME:-/usr/local/cuda}
rm -rf "$O" && mkdir -p "$O/cells" "$R" || exit 2
CI=$C/extras/CUPTI/include CL=$C/extras/CUPTI/lib64
[ -d "$CI" ] || CI=$C/include
[ -e "$CL/libcupti.so" ] || CL=$C/lib64
t0=$SECONDS
"$C/bin/nvcc" -O2 -arch=sm_90 -I"$CI" -o "$O/graph_fin_probe" "$HERE/graph_fin_probe.cu" -L"$CL" -lcupti -lcublas \
	-Xlinker -rpath -Xlinker "$CL" >"$O/build.txt" 2>&1 || { cat "$O/build.txt"; echo "graph_fin_matrix: the probe does not build"; exit 2; }
gcc -O2 -shared -fPIC -I"$CI" -I"$C/include" -o "$O/libcuptishim.so" "$HERE/cupti_shim.c" -L"$CL" -lcupti -lpthread \
	-Wl,-rpath,"$CL" >>"$O/build.txt" 2>&1 || { echo "graph_fin_matrix: the shim does not build (torch cells left out)"; TORCH=0; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset LD_PRELOAD CUDA_INJECTION64_PATH

cells() {
	local a c g i f r
	for g in k t; do
		for a in none K KM KMS all gt win; do
			for c in none launch domains resource graph sp; do
				echo "P G=$g,A=$a,C=$c,I=under,F=sync,R=same,X=0,T=1"
			done
		done
	done
	for a in KM win; do
		for i in pre split under; do
			for f in sync inflight race; do
				for r in same reinst update; do
					echo "P G=t,A=$a,C=sp,I=$i,F=$f,R=$r,X=0,T=1"
				done
			done
		done
	done
	for f in sync inflight race; do echo "P G=t,A=KM,C=sp,I=under,F=$f,R=same,X=1,T=1"; done
	for g in k t; do for r in same reinst update; do echo "P G=$g,A=none,C=off,I=under,F=sync,R=$r,X=0,T=1"; done; done
	if [ "${TORCH:-1}" = 1 ]; then
		local m
		for m in graph train compile; do
			echo "T --mode $m --spec C=off"
			echo "T --mode $m --spec A=win,C=sp,T=1"
			echo "T --mode $m --spec A=win,C=sp,T=1 --fin race"
			echo "T --mode $m --spec A=KM,C=sp,T=1"
			echo "T --mode $m --spec A=all,C=domains,T=1"
			echo "T --mode $m --spec A=KM,C=resource,T=1"
			echo "T --mode $m --spec A=win,C=sp,T=1 --when pre"
			echo "T --mode $m --spec A=win,C=sp,T=1 --win 40-50"
			echo "T --mode $m --spec A=win,C=sp,T=1 --capkinds"
			echo "T --mode $m --spec A=KM,C=sp,T=1 --kmoff 20"
		done
		for m in graph train; do
			echo "T --mode $m --spec C=off --after reinst"
			echo "T --mode $m --spec A=win,C=sp,T=1 --after reinst"
			echo "T --mode $m --spec C=off --after recapture"
			echo "T --mode $m --spec A=win,C=sp,T=1 --after recapture"
			echo "T --mode $m --spec A=KM,C=sp,T=1 --when pre"
		done
	fi
}
# one KIND ARGS: runs a cell; prints its line (the probe's own, or what killed it)
one() {
	local kind=$1
	shift
	local name log rc line
	name=$(echo "$kind $*" | tr -c 'A-Za-z0-9=,_-' '_')
	log=$O/cells/$name.log
	if [ "$kind" = P ]; then
		timeout -k 5 30 "$O/graph_fin_probe" "$1" >"$log" 2>&1
	else
		timeout -k 5 90 "$PY" "$HERE/torch_graph_probe.py" --shim "$O/libcuptishim.so" "$@" >"$log" 2>&1
	fi
	rc=$?
	line=$(grep -a -m1 -E '^(TORCH)?CELL ' "$log")
	case "$line" in
	*": OK "*) echo "OK      ${line#*CELL }" ;;
	*": SETUP "*) echo "SETUP   ${line#*CELL }" ;;
	*": FAIL "*) echo "FAIL    ${line#*CELL }" ;;
	*) [ $rc = 124 ] || [ $rc = 137 ] && echo "TIMEOUT $kind $* (30/90 s)" ||
		echo "CRASH   $kind $* exit $rc: $(tail -2 "$log" | tr '\n' ' ' | cut -c1-200)" ;;
	esac
}
export -f one
export O PY HERE
cells | awk '!seen[$0]++' | grep -E -- "${ONLY:-.}" | xargs -P "$J" -I{} bash -c 'one {}' >"$O/lines.txt" 2>&1
sort -k2 "$O/lines.txt" >"$O/matrix.txt"

if [ "${SANITIZER:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
	for s in "G=t,A=KM,C=sp,I=under,F=sync,R=same,X=0,T=1" "G=t,A=win,C=sp,I=under,F=race,R=same,X=0,T=1" \
		"G=t,A=none,C=off,I=under,F=sync,R=same,X=0,T=1"; do
		timeout -k 5 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$O/graph_fin_probe" "$s" \
			>"$O/cells/sanitizer_$s.log" 2>&1
		rc=$?
		sum=$(grep -a -E 'ERROR SUMMARY|Device not supported|error' "$O/cells/sanitizer_$s.log" | head -2 | tr '\n' ' ' | cut -c1-200)
		cell=$(grep -a -m1 '^CELL' "$O/cells/sanitizer_$s.log" | cut -c1-160)
		echo "SANITIZER exit $rc ($s): ${sum:-no summary}; ${cell:-no CELL line}" >>"$O/matrix.txt"
	done
else
	echo "SANITIZER not run (compute-sanitizer absent or SANITIZER=0)" >>"$O/matrix.txt"
fi

# torch cells: each checksum against the same cell without CUPTI (training: only where the replay
# count is fixed, i.e. not while racing the detach)
"$PY" - "$O/matrix.txt" >"$O/checksums.txt" <<'PY'
import re, sys
rows = [l.rstrip("\n") for l in open(sys.argv[1])]
ref, out = {}, []
def key(l):
    m = re.search(r"mode=(\w+),(.*?),when=(\w+),fin=(\w+),after=(\w+)", l)
    return m and (m.group(1), m.group(3), m.group(4), m.group(5), m.group(2))
for l in rows:
    k, m = key(l), re.search(r"checksum=(\S+)", l)
    if k and m and "C=off" in k[4]:
        ref[k[:4]] = m.group(1)
for l in rows:
    k, m = key(l), re.search(r"checksum=(\S+)", l)
    if not k or not m or "C=off" in k[4]:
        continue
    r = ref.get(k[:4]) or ref.get((k[0], "under", "sync", k[3]))
    if k[0] == "train" and k[2] == "race":
        out.append(f"n/a       {l[8:90]}: training replays during the detach vary")
    elif r is None:
        out.append(f"NOREF     {l[8:90]}")
    else:
        out.append(f"{'SAME' if r == m.group(1) else 'DIFFERENT':9} {l[8:90]}: {m.group(1)} vs {r} without CUPTI")
print("\n".join(out))
PY
cat "$O/matrix.txt"
echo "== checksums of the torch cells against their runs without CUPTI"
cat "$O/checksums.txt"
echo "== failures"
grep -E '^(FAIL|TIMEOUT|CRASH)' "$O/matrix.txt" || echo "(none)"
grep -E '^DIFFERENT' "$O/checksums.txt"
n=$(grep -cE '^(OK|FAIL|SETUP|TIMEOUT|CRASH)' "$O/matrix.txt")
bad=$(grep -cE '^(FAIL|TIMEOUT|CRASH)' "$O/matrix.txt")
diff=$(grep -c '^DIFFERENT' "$O/checksums.txt")
(cd "$O" && tar czf "$R/graph_fin-matrix.tgz" matrix.txt checksums.txt build.txt cells 2>/dev/null)
{ cat "$O/matrix.txt"; echo "== torch checksums"; cat "$O/checksums.txt"; } >"$R/graph_fin-matrix.txt"
echo "graph_fin_matrix: $n cells, $(grep -c '^OK' "$O/matrix.txt") OK, $bad FAIL/TIMEOUT/CRASH, $(grep -c '^SETUP' "$O/matrix.txt") SETUP, $diff torch checksums different; $((SECONDS - t0)) s; $R/graph_fin-matrix.tgz"
[ "$bad" = 0 ] && [ "$diff" = 0 ]
