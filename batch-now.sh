#!/usr/bin/env bash
# one device call, checks one after another on a quiet GPU (not committed)
set -u
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
echo "=== bench"; ROUNDS=2 ONLY=hf_trainer LIMIT=240 OUT=/tmp/ob bash tests/gpu/programs/run.sh dist/stepprof bench 2>&1 | tail -30; cp /tmp/ob/bench.md "$OUT/" 2>/dev/null
echo "=== suite ($((SECONDS - t0)) s)"; ONLY='^(build|mlp-auto|nomalloc-lib)$' OUT=/tmp/o1 bash tests/gpu/device-suite.sh 2>&1 | tail -6
echo "=== ops ($((SECONDS - t0)) s)"; OUT=$OUT timeout 125 bash tests/gpu/ops_check.sh dist/stepprof 2>&1 | tail -45
if [ -f tests/gpu/torch_memory.sh ]; then echo "=== torch_memory ($((SECONDS - t0)) s)"; OUT=$OUT timeout 100 bash tests/gpu/torch_memory.sh dist/stepprof 2>&1 | tail -25; fi
echo "=== done ($((SECONDS - t0)) s)"
