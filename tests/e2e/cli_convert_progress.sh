#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_convert_progress.sh - `stepprof convert`'s progress line: shown on stderr when stderr is a
# terminal and the conversion runs past STEPPROF_PROGRESS_AFTER (1 s by default; 0 here, so that a
# small trace shows it), rewritten in place and erased at the end; never when stderr is not a
# terminal, and never before that time. stderr is given a pseudo-terminal by Python's pty module.
# Exits non-zero on the first failure.
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T"
"$B/tests/e2e/gen_ddp" prog 1 1 2 20000 3 # 40,000 kernels: about 160,000 events, progress every 65,536

# runs "$@" with stderr on a pseudo-terminal (stdout to out.txt); prints the seconds it ran and
# what the terminal got
on_tty() {
	python3 - "$@" <<'PY'
import os, pty, subprocess, sys, time
t0 = time.monotonic()
master, slave = pty.openpty()
with open("out.txt", "wb") as out:
    p = subprocess.Popen(sys.argv[1:], stdout=out, stderr=slave)
os.close(slave)
got = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not chunk:
        break
    got += chunk
rc = p.wait()
sys.stdout.write(f"{time.monotonic() - t0:.3f} {got!r}\n")
sys.exit(rc)
PY
}

# a terminal, time 0: the line shows, with the count of events, and is erased before the summary
got=$(STEPPROF_PROGRESS_AFTER=0 on_tty "$B/stepprof" convert prog0.sptrace -o a.json.gz) || fail "convert on a tty: $got"
case "$got" in
*'\r\x1b[Kstepprof convert: prog0.sptrace: '*' events written, '*'\r\x1b[Kwrote a.json.gz'*) ;;
*) fail "no progress line on a terminal: $got" ;;
esac
# STEPPROF_NO_PROGRESS=1: none, on a terminal too
got=$(STEPPROF_NO_PROGRESS=1 STEPPROF_PROGRESS_AFTER=0 on_tty "$B/stepprof" convert prog0.sptrace -o e.json.gz) ||
	fail "convert on a tty: $got"
case "$got" in *'events written'* | *'reading the trace'*) fail "progress with STEPPROF_NO_PROGRESS=1: $got" ;; esac
# a terminal, the default second: no line from a conversion that ends sooner
got=$(on_tty "$B/stepprof" convert prog0.sptrace -o b.json.gz) || fail "convert on a tty: $got"
if grep -q 'events written' <<<"$got" && awk -v t="${got%% *}" 'BEGIN { exit !(t < 1) }'; then
	fail "a progress line before the first second: $got"
fi
# not a terminal: never, whatever the time
STEPPROF_PROGRESS_AFTER=0 "$B/stepprof" convert prog0.sptrace -o d.json.gz 2>err.txt || fail "convert: $(cat err.txt)"
if grep -q 'events written' err.txt || grep -q $'\r' err.txt; then
	fail "progress written to a stderr that is not a terminal: $(cat -v err.txt)"
fi
# the output is the same either way
cmp <(gzip -dc a.json.gz | sed 's/"traceName": .*//') <(gzip -dc d.json.gz | sed 's/"traceName": .*//') ||
	fail "the output changes with the progress line"
echo "cli_convert_progress: ok"
