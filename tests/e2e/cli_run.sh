#!/usr/bin/env bash
# cli_run.sh - `stepprof run` end to end without a GPU: the command runs with the library
# preloaded (libstepprof-nomalloc.so, without malloc hooks, unless host_malloc is on) and its own
# exit status; --set and --ranks reach it as STEPPROF_<SECTION>_<KEY> variables; a bad --set,
# --ranks or configuration stops before running anything (exit 2).
# Needs $SP_BUILD (build dir); exits non-zero on any failure.
set -u
SP=$(cd "${SP_BUILD:?}" && pwd)/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD
# a SAN=address build: the ASan runtime must come first in every process (stepprof run keeps a
# sanitizer runtime of LD_PRELOAD in front of the library), and leak reports stay out of stderr
asan=$(ldd "${SP%/stepprof}/libstepprof.so" 2>/dev/null | awk '/libasan/ {print $3}')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
cd "$T" || exit 1
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}

"$SP" run --set schedule.wait=3 --ranks 0,7 --out "$T/traces" -- \
	sh -c 'echo "wait=$STEPPROF_SCHEDULE_WAIT ranks=$STEPPROF_RANKS_RANKS out=$STEPPROF_PROFILE_OUTPUT"; case "$LD_PRELOAD" in *libstepprof-nomalloc.so*) exit 7;; esac; exit 1' \
	>run.out 2>run.err
rc=$?
ok "the command's exit status (7: it saw the library without malloc hooks preloaded)" [ "$rc" = 7 ]
ok "--set and --ranks reach the command" grep -qxF "wait=3 ranks=0,7 out=$T/traces" run.out
ok "no trace from a process without CUDA, said on stderr" grep -qF "stepprof run: no trace written" run.err
"$SP" run --set activities.host_malloc=true -- sh -c 'case "$LD_PRELOAD" in */libstepprof.so*) exit 7;; esac; exit 1' 2>/dev/null
ok "host_malloc = true: the library with malloc hooks" [ "$?" = 7 ]
inj=$("$SP" run -- sh -c 'echo "$CUDA_INJECTION64_PATH"' 2>/dev/null)
ok "the injection hook names the preloaded library ($inj)" [ "${inj##*/}" = libstepprof-nomalloc.so ]
LIBDIR=${SP%/stepprof}
hooks() { nm -D --defined-only "$1" | grep -cwE "(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc)$"; }
ok "libstepprof.so defines the 8 malloc-family hooks" [ "$(hooks "$LIBDIR/libstepprof.so")" = 8 ]
ok "libstepprof-nomalloc.so defines none" [ "$(hooks "$LIBDIR/libstepprof-nomalloc.so")" = 0 ]

"$SP" run --set schedule.wiat=3 -- sh -c 'echo ran' >bad.out 2>bad.err
rc=$?
ok "unknown key: exit 2" [ "$rc" = 2 ]
ok "unknown key: nothing ran" [ ! -s bad.out ]
ok "unknown key: named, with what is allowed" grep -qF "[schedule] wiat: unknown key (allowed: skip_first," bad.err
"$SP" run --set bogus -- true 2>bogus.err
ok "not SECTION.KEY=VALUE: exit 2" [ "$?" = 2 ]
ok "not SECTION.KEY=VALUE: said" grep -qF "expected SECTION.KEY=VALUE" bogus.err
"$SP" run --ranks 0-x -- true 2>ranks.err
ok "bad --ranks: exit 2" [ "$?" = 2 ]
ok "bad --ranks: said" grep -qF "[ranks] ranks: bad rank or range" ranks.err
"$SP" run --set schedule.active=0 -- true 2>range.err
ok "out of range: exit 2" [ "$?" = 2 ]
"$SP" run 2>usage.err
ok "no command: exit 2 with usage" [ "$?" = 2 ]
ok "usage names --set" grep -qF -- "--set SECTION.KEY=VALUE" usage.err
"$SP" run -- sh -c 'exit 0' 2>/dev/null
ok "exit 0 passes through" [ "$?" = 0 ]

# a stepprof installed under a path with a space: LD_PRELOAD can't quote it, so the library is
# preloaded through a private link, whole (no "cannot be preloaded" from ld.so), and the link is
# gone afterwards
mkdir -p "$T/with space/bin"
cp "$SP" "${SP%/stepprof}/libstepprof.so" "${SP%/stepprof}/libstepprof-nomalloc.so" "$T/with space/bin/"
TMPDIR=$T/tmp && mkdir -p "$TMPDIR" && export TMPDIR
"$T/with space/bin/stepprof" run -- sh -c 'for f in $LD_PRELOAD; do [ -f "$f" ] || exit 1; done; case "$LD_PRELOAD" in *stepprof-run.*/lib/libstepprof-nomalloc.so*) exit 7;; esac; exit 1' >space.out 2>space.err
rc=$?
ok "a library path with a space: every LD_PRELOAD entry is a file, through the link (exit $rc)" [ "$rc" = 7 ]
ok "a library path with a space: ld.so loaded it" test "$(grep -c "cannot be preloaded" space.err)" = 0
ok "a library path with a space: the private link is removed" [ -z "$(ls "$TMPDIR")" ]
unset TMPDIR

exit $failed
