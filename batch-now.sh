#!/usr/bin/env bash
# one device call: the GPU checks of this session (not committed)
set -u
mkdir -p "$OUT"
SP=dist/stepprof/bin/stepprof
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
jobs=(
 "suite=OUT=/tmp/o1 bash tests/gpu/device-suite.sh"
 "progs=LIMIT=340 J=4 ONLY='^(compile_infer_graphs|compile_infer_graphs_300|hf_trainer|gradscaler_resnet)\$' OUT=/tmp/o2 bash tests/gpu/programs/run.sh dist/stepprof steps; for f in \$(find /tmp/spprog/steps -path '*truth*' -name '*.sptrace'); do echo \"\$f: \$($SP dump \$f | grep -c captured=1) captured; \$($SP report \$f 2>&1 | grep -E '^(Dropped|Missing)')\"; done; cp /tmp/o2/steps-table.txt $OUT/ 2>/dev/null"
 "bridge=OUT=/tmp/o3 bash tests/gpu/bridge_smoke.sh dist/stepprof"
 "crash=timeout 200 bash tests/gpu/crash.sh"
 "readers=OUT=/tmp/o5 bash tests/gpu/readers_bounded.sh dist/stepprof"
)
[ -f tests/gpu/ops_check.sh ] && jobs+=("ops=OUT=$OUT bash tests/gpu/ops_check.sh dist/stepprof")
bash tests/gpu/device-batch.sh "${LIMIT:-420}" "${jobs[@]}"
