#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_random_ini.sh - the configuration parser (the same code the injected library runs inside the
# user's program) on random INI files: known and unknown sections and keys, values of every kind
# and of none, overlong lines, stray bytes, duplicate keys, comments, and random STEPPROF_*
# overrides. `stepprof check` must exit 0 (valid) or 2 (errors listed), `stepprof schedule` 0 or 2,
# never crash or report to a sanitizer; a file check accepts must print a configuration that check
# accepts again. RANDOM_INIS (default 300) and RANDOM_SEED (default 1) pick the files.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
N=${RANDOM_INIS:-300} SEED=${RANDOM_SEED:-1}
# shellcheck source=tests/e2e/lib/checked.sh
. "$R/tests/e2e/lib/checked.sh"

python3 - "$T" "$N" "$SEED" <<'PY'
import random, sys
out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
keys = {
    "profile": ["enabled", "output"], "ranks": ["ranks"],
    "schedule": ["skip_first", "skip_first_wait", "wait", "warmup", "active", "repeat", "profiling_frequency"],
    "marker": ["kind", "pattern", "every"],
    "activities": ["kernels", "memcpy", "memset", "sync", "runtime_api", "driver_api", "nccl", "nvtx",
                   "device_memory", "host_malloc", "host_malloc_min", "stacks", "stack_depth", "kernel_shapes", "ops", "modules",
                   "torch_memory", "torch_memory_entries"],
    "limits": ["window_max_bytes", "ring_events", "cupti_buffer_bytes"], "cupti": ["library"],
}
values = ["0", "1", "-1", "true", "false", "yes", "off", "3", "10", "64K", "8M", "1G", "2T", "99999999999999999999",
          "-9223372036854775808", "0x10", "1.5", "", " ", "all", "0,7", "0-3,5", "1-", ",", "0-99999999", "auto",
          "kernel", "api", "nccl", "nvtx", "profiler_range", "*", "*gemm*", "[", "cudaDeviceSynchronize*",
          "out/{host}/{rank}/{pid}/{date}/{time}/{jobid}", "{", "{nope}", "%s%n%x", "\u00e9\u00e8", "a" * 5000]
good = {"bool": ["true", "false", "yes", "off", "1", "0"], "int": ["1", "3", "10", "2"],
        "size": ["64K", "8M", "256K"], "ranks": ["all", "0", "0,7", "0-3,5"],
        "kind": ["auto", "kernel", "api", "nccl", "nvtx", "profiler_range"], "str": ["*gemm*", "cudaDeviceSynchronize*"],
        "output": ["out/{host}/{rank}/{pid}", "traces/{date}-{time}"], "lib": [""]}
typ = {"enabled": "bool", "output": "output", "ranks": "ranks", "skip_first_wait": "bool", "kind": "kind",
       "pattern": "str", "host_malloc_min": "size", "window_max_bytes": "size", "ring_events": "size",
       "cupti_buffer_bytes": "size", "library": "lib", "stack_depth": "int", "every": "int"}
for k in ("skip_first", "wait", "warmup", "active", "repeat", "profiling_frequency"):
    typ[k] = "int"
for i in range(n):
    junk = rnd.choice([0.0, 0.0, 0.03, 0.3])  # how often a line is garbage
    lines, used = [], set()
    for _ in range(rnd.randrange(0, 30)):
        r = rnd.random()
        if r < 0.15:
            sec = rnd.choice(list(keys)) if rnd.random() >= junk else rnd.choice(["nope", "", "profile ", "[x]"])
            lines.append("[%s]" % sec)
        elif r < 0.75 or not junk:
            sec = rnd.choice(list(keys))
            lines.append("[%s]" % sec)
            if rnd.random() >= junk:
                key = rnd.choice(keys[sec])
                if (sec, key) in used or key in ("kind", "pattern"):
                    continue  # a key twice, or a pattern without its kind, is an error
                used.add((sec, key))
                lines.append("%s = %s" % (key, rnd.choice(good[typ.get(key, "bool")])))
                continue
            key = rnd.choice(keys[sec] + ["unknown", "", "enabled enabled"])
            val = rnd.choice(values) if rnd.random() < 0.9 else "".join(chr(rnd.randrange(1, 0x250)) for _ in range(rnd.randrange(1, 40)))
            sep = rnd.choice(["=", " = ", ":", "==", " "])
            lines.append("%s%s%s" % (key, sep, val))
        elif r < 0.85:
            lines.append(rnd.choice(["; comment", "# comment", "", "   ", "=", "[", "]", "key", "\t\t"]))
        else:
            lines.append("".join(chr(rnd.randrange(1, 256)) for _ in range(rnd.randrange(0, 300))))
    with open("%s/c%d.ini" % (out, i), "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("\n".join(lines) + rnd.choice(["\n", "", "\r\n"]))
    env = []
    for _ in range(rnd.randrange(0, 3)):
        sec = rnd.choice(list(keys))
        env.append("STEPPROF_%s_%s=%s" % (sec.upper(), rnd.choice(keys[sec]).upper(), rnd.choice(values[:30])))
    with open("%s/c%d.env" % (out, i), "w") as f:
        f.write("\n".join(env))
PY

cd "$T"
# run NAME ALLOWED CMD...: run_checked, whatever the allowed exit code
run() { run_checked "$@" || true; }
valid=0
for ((i = 0; i < N; i++)); do
	mapfile -t envs <"c$i.env"
	run check "0 2" env "${envs[@]}" "$B/stepprof" check "c$i.ini"
	if [ -s out.txt ] && grep -q 'is valid' out.txt; then
		valid=$((valid + 1))
		cp out.txt "p$i.ini" # the printed configuration is itself a valid file
		run recheck "0" "$B/stepprof" check "p$i.ini"
	fi
	run schedule "0 2" env "${envs[@]}" "$B/stepprof" schedule --config "c$i.ini" --count 30
done
[ "$valid" -gt 0 ] && [ "$valid" -lt "$N" ] || fail "$valid of $N random files valid: the generator misses a side"
echo "ok   $N random INI files through check and schedule, $valid valid (seed $SEED)"
