# SPDX-License-Identifier: MIT
# preload.sh - sourced by the tests that preload the library into a stand-in CUDA program
# (cupti_life.sh, share.sh, phases.sh, trigger.sh), not run by itself: sets PRE to what LD_PRELOAD
# takes, libstepprof-nomalloc.so of $B, with the ASan runtime first for a SAN=address build.
PRE=$B/libstepprof-nomalloc.so
asan=$(ldd "$PRE" 2>/dev/null | awk '/libasan/ {print $3}')
[ -n "$asan" ] && { PRE="$asan $PRE"; export ASAN_OPTIONS=detect_leaks=0; }
