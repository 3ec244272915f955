#!/usr/bin/env bash
# inert.sh - libstepprof.so preloaded into programs that never initialise CUDA changes nothing:
# same stdout, stderr and exit code, no trace file or directory, no extra thread, nothing mapped
# from CUPTI. Needs no GPU.
set -u
B=${SP_BUILD:?} LIB=$SP_BUILD/libstepprof.so PRE=$SP_BUILD/libstepprof.so
# a SAN=address build: the ASan runtime must come first in the process, and its leak report
# (of the programs' own allocations) must not change their stderr
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ {print $3}')
[ -n "$asan" ] && { PRE="$asan $LIB"; export ASAN_OPTIONS=detect_leaks=0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export STEPPROF_PROFILE_OUTPUT=$tmp/out STEPPROF_RANKS_RANKS=all
fail=0
same() { # label, command...
	local label=$1; shift
	"$@" >"$tmp/a.out" 2>"$tmp/a.err"; local ra=$?
	LD_PRELOAD="$PRE" "$@" >"$tmp/b.out" 2>"$tmp/b.err"; local rb=$?
	if [ $ra -ne $rb ] || ! cmp -s "$tmp/a.out" "$tmp/b.out" || ! cmp -s "$tmp/a.err" "$tmp/b.err"; then
		echo "FAIL $label: exit $ra vs $rb"; diff "$tmp/a.out" "$tmp/b.out" | head; diff "$tmp/a.err" "$tmp/b.err" | head
		fail=1
	else
		echo "ok   $label (exit $ra)"
	fi
}
same "/bin/true" /bin/true
same "/bin/false" /bin/false
same "python3 print" python3 -c 'print(1)'
same "python3 exit 3" python3 -c 'import sys; print("x"); sys.exit(3)'
same "shell pipeline" sh -c 'echo hello | tr a-z A-Z; exit 7'
same "fork and exec" "$B/tests/e2e/forker" sh -c 'echo child; exit 5'
same "threads" "$B/tests/e2e/forker"
# nothing written, no CUPTI mapped
if [ -e "$tmp/out" ]; then echo "FAIL: output directory created"; fail=1; else echo "ok   no output directory"; fi
maps=$(LD_PRELOAD="$PRE" python3 -c 'print(open("/proc/self/maps").read())')
if echo "$maps" | grep -q libcupti; then echo "FAIL: libcupti mapped"; fail=1; else echo "ok   no libcupti mapped"; fi
echo "$maps" | grep -q libstepprof || { echo "FAIL: library not preloaded (test is void)"; fail=1; }
# disabled: not even the injection variable is set
v=$(STEPPROF_PROFILE_ENABLED=0 LD_PRELOAD="$PRE" sh -c 'echo "${CUDA_INJECTION64_PATH:-unset}"')
[ "$v" = unset ] && echo "ok   enabled=0 leaves the environment alone" || { echo "FAIL: enabled=0 set $v"; fail=1; }
v=$(LD_PRELOAD="$PRE" sh -c 'echo "${CUDA_INJECTION64_PATH:-unset}"')
case "$v" in */libstepprof.so) echo "ok   injection hook points at the library";; *) echo "FAIL: hook is $v"; fail=1;; esac
# the library without malloc hooks (what `stepprof run` preloads when host_malloc is off)
PRE=${PRE/libstepprof.so/libstepprof-nomalloc.so}
same "without malloc hooks: python3 exit 3" python3 -c 'import sys; print("x"); sys.exit(3)'
same "without malloc hooks: threads" "$B/tests/e2e/forker"
v=$(LD_PRELOAD="$PRE" sh -c 'echo "${CUDA_INJECTION64_PATH:-unset}"')
case "$v" in */libstepprof-nomalloc.so) echo "ok   its injection hook points at itself";; *) echo "FAIL: hook is $v"; fail=1;; esac
exit $fail
