# SPDX-License-Identifier: MIT
# cupti_names.sh - sourced by tests and benches that give the stand-in libcupti every callback's
# name as CUPTI names it (fakecupti.c FAKE_CUPTI_NAMES): cupti_names FILE writes "0|1 CBID NAME"
# lines (0 runtime, 1 driver) from the toolkit's CUPTI headers. Returns 1 if none are found.
cupti_names() {
	local inc d
	for d in "${CUDA_HOME:-/usr/local/cuda}/extras/CUPTI/include" "${CUDA_HOME:-/usr/local/cuda}/include"; do
		[ -f "$d/cupti_runtime_cbid.h" ] && inc=$d && break
	done
	[ -n "${inc:-}" ] || return 1
	/usr/bin/python3 - "$inc" >"$1" <<'PY'
import re, sys
for k, (f, pre) in enumerate([("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"), ("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")]):
    for name, v in re.findall(pre + r"(\w+)\s*=\s*(\d+)", open(f"{sys.argv[1]}/{f}").read()):
        if "SIZE" not in name and "INVALID" not in name and "FORCE_INT" not in name:
            print(k, v, name)
PY
}
