#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# output_fail.sh - what stepprof says when its output fails, without a GPU (tests/e2e/crash_driver,
# the stand-in libcupti, libstepprof preloaded; windows at steps 3-5, 9-11 and 15-17):
#  - an output directory that cannot be created: one line naming it and the error (it was said
#    twice, by the trace and by the on-demand files), and at exit which steps were lost, not a
#    line that blames the schedule; `stepprof run`'s last line says the same;
#  - a disk that fills up (a small tmpfs, where unshare -m is allowed): the trace is said to be
#    cut short at exit, with the window it cut and the windows not written;
#  - the output directory removed while the program runs: said when seen (at a window's end, or
#    at exit), and at exit which windows were lost;
#  - a placeholder whose value comes from the environment ({jobid} = '..') stays inside the
#    configured directory, and that is said once.
# The program always runs on to its own exit status.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }

# ini NAME OUTPUT: the configuration of run NAME
ini() {
	mkdir -p "$T/$1"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 2\nwarmup = 1\nactive = 3\nrepeat = 3\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\n" \
		"$2" "$B/tests/e2e/libfakecupti.so" >"$T/$1/sp.ini"
}
# run NAME STEP_US [ENV...]: 30 steps of the driver with NAME's configuration; sets rc
run() {
	local name=$1 us=$2
	shift 2
	env STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" "$@" timeout 60 "$B/tests/e2e/crash_driver" 30 "$us" \
		>"$T/$name/stdout" 2>"$T/$name/stderr"
	rc=$?
}

# ---- an output directory that cannot be made ----
touch "$T/file"
ini nodir "$T/file/sub"
run nodir 2000
e=$T/nodir/stderr
[ $rc = 0 ] && [ "$(grep -c 'stepprof: ' "$e")" = 2 ] &&
	[ "$(grep -c "^stepprof: cannot create output directory $T/file/sub: Not a directory; not profiling" "$e")" = 1 ] &&
	tail -1 "$e" | grep -q "no trace written (cannot create output directory $T/file/sub: Not a directory): the 9 steps the schedule records from step 3 to 17 are lost" &&
	! grep -q "schedule records from step 3 (" "$e" &&
	ok "an output directory that cannot be made: said once with its path and error, the lost steps at exit" ||
	bad "nodir: exit $rc: $(cat "$e")"
"$B/stepprof" run -c "$T/nodir/sp.ini" -- "$B/tests/e2e/crash_driver" 30 2000 >/dev/null 2>"$T/nodir/run.err"
tail -1 "$T/nodir/run.err" | grep -q "^stepprof run: no trace written: no process made the output directory $T/file/sub " &&
	ok "stepprof run: the last line names the output directory, not the schedule" ||
	bad "nodir run: $(tail -2 "$T/nodir/run.err")"

# ---- a disk that fills up ----
mkdir -p "$T/mnt"
if unshare -m true 2>/dev/null; then
	ini full "$T/mnt/out"
	unshare -m sh -c 'mount -t tmpfs -o size=8k tmpfs "$1" && shift && "$@"; echo "rc=$?"' sh "$T/mnt" \
		env STEPPROF_CONFIG="$T/full/sp.ini" LD_PRELOAD="$PRE" LAUNCHES=2000 \
		"$B/tests/e2e/crash_driver" 30 2000 >"$T/full/stdout" 2>"$T/full/stderr"
	e=$T/full/stderr
	grep -q "^rc=0" "$T/full/stdout" && [ "$(grep -c "No space left on device); dropping further events" "$e")" = 1 ] &&
		grep -Eq "stepprof: trace $T/mnt/out/norank\..*\.sptrace is cut short \(No space left on device\): (its window of steps [0-9]+-[0-9]+ ends early|[0-9]+ later windows? \(steps)" "$e" &&
		ok "a full disk: the program runs on; at exit, what the cut trace lacks" ||
		bad "full: $(cat "$T/full/stdout" "$e")"
else
	echo "skip a full disk: unshare -m is not allowed here"
fi

# ---- the output directory removed while the program runs (one window, steps 3-22) ----
ini removed "$T/removed/out"
sed -i 's/^active = 3$/active = 20/; s/^repeat = 3$/repeat = 1/' "$T/removed/sp.ini"
run removed 20000 &
for _ in $(seq 500); do ls "$T/removed/out/"*.sptrace >/dev/null 2>&1 && break; sleep 0.02; done
sleep 0.1 # inside the first window (steps 3-5)
rm -rf "$T/removed/out"
wait $!
rc=$?
e=$T/removed/stderr
[ $rc = 0 ] && grep -q "was removed while it was written (its directory or the file deleted)" "$e" &&
	grep -Eq "stepprof: trace $T/removed/out/norank\..*\.sptrace is lost \(removed while it was written\): 1 window \(steps 3-22\) not written" "$e" &&
	ok "the output directory removed: said, and at exit the windows lost" || bad "removed: exit $rc: $(cat "$e")"

# ---- a placeholder from the environment ----
ini jobid "$T/R/{jobid}/x"
run jobid 2000 SLURM_JOB_ID=..
e=$T/jobid/stderr
[ $rc = 0 ] && ls "$T/R/_./x/"*.sptrace >/dev/null 2>&1 && [ ! -e "$T/x" ] && [ ! -e "$T/R/x" ] &&
	[ "$(grep -c "{jobid} is '..' (from SLURM_JOB_ID), not a safe folder name: written as '_.'" "$e")" = 1 ] &&
	ok "{jobid} = '..' stays inside the configured directory, said once" ||
	bad "jobid: exit $rc, $(find "$T/R" "$T/x" 2>/dev/null | head -5): $(cat "$e")"

[ $fail = 0 ] && echo "output_fail: all passed"
exit $fail
