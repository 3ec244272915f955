#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/convert_bench.sh BUILD_DIR [CMP_BUILD_DIR] - the conversion rate of `stepprof convert`, end to end (read
# the trace, write Chrome JSON, gzip it), on the host (no GPU). Generates a data-parallel trace with
# tests/e2e/gen_ddp (KERNELS kernels per step, 10 steps, one window: by default 500 K kernels and
# 500 K launches, 1 M records), converts it ROUNDS times to .json.gz and to plain .json, and prints per run the
# wall and CPU seconds, the trace records read per second and the JSON events written per second
# (an ac2g flow's two ends count as two events, as `convert` counts them), the output MB/s and the
# gzip size; for gzip also the CPU seconds of the writing thread (reads the trace, formats, CRC)
# and of the gzip thread (deflate), which run side by side: on two free cores the wall time is
# the larger of the two, so `idle ev/s` = events / that is the rate of an unloaded machine. The
# machine's load is printed with it: on a shared machine the wall time is only meaningful next to
# the CPU time. With CMP_BUILD_DIR (another build, e.g. of main), each run of BUILD_DIR is
# followed by one of that build on the same trace (rows "cmp"), so that both see the same load,
# and the decompressed outputs are compared (they must be equal but for traceName).
# Settings: KERNELS (50000), ROUNDS (3), OUT (/tmp/stepprof-convert-bench).
set -eu
BUILD=$(cd "${1:?usage: bench/convert_bench.sh BUILD_DIR [CMP_BUILD_DIR]}" && pwd)
CMP=$([ -n "${2:-}" ] && cd "$2" && pwd || true)
OUT=${OUT:-/tmp/stepprof-convert-bench}
KERNELS=${KERNELS:-50000}
ROUNDS=${ROUNDS:-3}
for f in "$BUILD/stepprof" "$BUILD/tests/e2e/gen_ddp"; do
	[ -x "$f" ] || { echo "missing $f: run 'make all build/tests/e2e/gen_ddp' first"; exit 2; }
done
rm -rf "$OUT" && mkdir -p "$OUT" && cd "$OUT"
"$BUILD/tests/e2e/gen_ddp" big 1 1 10 "$KERNELS" 1
records=$("$BUILD/stepprof" dump big0.sptrace 2>/dev/null | grep -c '^[A-Za-z0-9_-]* ' || true)
echo "trace: $(du -h big0.sptrace | cut -f1), $records records ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-12s %4s %6s %6s %13s %13s %6s %8s %6s %6s %13s\n' output run wall_s cpu_s "records/s" "events/s" "MB/s" \
	size_MB write_s gzip_s "idle ev/s"
for kind in json.gz json; do
	for r in $(seq "$ROUNDS"); do
		for b in "$BUILD" ${CMP:+"$CMP"}; do
			label=$kind$([ "$b" = "$BUILD" ] || echo " cmp")
			rm -f "out.$kind"
			STEPPROF_CONVERT_STATS=1 /usr/bin/time -f '%e %U %S' -o time.txt "$b/stepprof" convert big0.sptrace \
				-o "out.$kind" 2>log.txt ||
				{ cat log.txt; exit 1; }
			read -r wall usr sys <time.txt
			events=$(sed -n 's/.*steps [0-9-]*, \([0-9]*\) events.*/\1/p' log.txt)
			raw=$([ "$kind" = json ] && stat -c %s "out.$kind" || gzip -dc "out.$kind" | wc -c)
			threads=$(sed -n 's/^stepprof: cpu: writing thread \([0-9.]*\) s, gzip thread \([0-9.]*\) s.*/\1 \2/p' log.txt)
			python3 - "$label" "$r" "$wall" "$usr" "$sys" "$records" "$events" "$raw" "$(stat -c %s "out.$kind")" \
				${threads:-} <<'EOF'
import sys
kind, r, wall, usr, sys_, rec, ev, raw, size = sys.argv[1:10]
wall, cpu = max(float(wall), 0.01), float(usr) + float(sys_)
t = [float(v) for v in sys.argv[10:12]]
idle = f"{int(ev) / max(max(t), 0.01):13,.0f}" if t else f"{'-':>13}"
print(f"{kind:12} {r:>4} {wall:6.2f} {cpu:6.2f} {int(rec) / wall:13,.0f} {int(ev) / wall:13,.0f} "
      f"{int(raw) / wall / 1e6:6.0f} {int(size) / 1e6:8.1f} {t[0] if t else 0:6.2f} {t[1] if t else 0:6.2f} {idle}")
EOF
			if [ -n "$CMP" ]; then # the two builds' outputs, decompressed, must be equal
				if [ "$b" = "$BUILD" ]; then
					mv "out.$kind" "new.$kind"
				elif ! cmp -s <(gzip -dcf "new.$kind" | sed 's/^"traceName": .*//') \
					<(gzip -dcf "out.$kind" | sed 's/^"traceName": .*//'); then
					echo "the outputs of $BUILD and $CMP differ ($kind)"
					exit 1
				fi
			fi
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
