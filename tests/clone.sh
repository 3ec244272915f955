#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# clone.sh - what a new user gets from GitHub: this repository's committed HEAD cloned into an empty
# folder with nothing beside it (no ../shared, so HTA and the like are absent), then `make test` there,
# which must end "N skipped; N passed, 0 failed" and leave the clone's tree as it was (build/ aside).
# Not part of `make test`: it runs `make test` itself, which would recurse and double its time;
# `make test-clone` and .ci/run run it after `make test`. Takes as long as `make` plus `make test`.
set -uo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/stepprof-clone.XXXXXX")
trap 'rm -rf "$T"' EXIT
git clone -q "$R" "$T/stepprof" || { echo "clone: git clone $R failed"; exit 1; }
cd "$T/stepprof" || exit 1
echo "clone: $(git log --oneline -1) in $T/stepprof (nothing beside it: $(ls -A "$T" | tr '\n' ' '))"
unset SP_HTA SP_BUILD SP_ROOT MAKEFLAGS MFLAGS MAKELEVEL # a make of its own, not a sub-make of ours
start=$(date +%s)
make -j"${JOBS:-2}" test >"$T/test.log" 2>&1
rc=$?
last=$(grep -E '^[0-9]+ skipped; [0-9]+ passed, [0-9]+ failed$' "$T/test.log" | tail -n 1)
grep -E '^skipped: (test_[a-z0-9_]+|[a-z0-9_]+\.sh): |^failed: ' "$T/test.log" | sed 's/^/clone: /'
echo "clone: make test exit $rc after $(($(date +%s) - start)) s: $last"
failed=0
[ "$rc" = 0 ] || failed=1
[[ $last =~ \ 0\ failed$ ]] || { echo "clone: FAIL no closing line '... 0 failed'"; failed=1; }
dirty=$(git status --porcelain --ignored | grep -v '^!! build/$' || true)
[ -z "$dirty" ] || { echo "clone: FAIL make test changed the source tree: $dirty"; failed=1; }
if [ "$failed" = 0 ]; then
	echo "clone: ok"
else # the log and what the failed tests kept (fuzz findings) outlive the scratch folder
	keep=${TMPDIR:-/tmp}/stepprof-clone-failed.$$
	mkdir -p "$keep" && cp "$T/test.log" "$keep/" && cp -r build/fuzz/findings "$keep/" 2>/dev/null
	awk '/^== /{name=$2} /^failed: /{split(substr($0, 9), f, " "); for (i in f) bad[f[i]] = 1}
		{log_[NR] = $0; who[NR] = name} END {for (i = 1; i <= NR; i++) if (who[i] in bad) print "clone: | " log_[i]}' \
		"$T/test.log" | tail -n 60
	echo "clone: the whole log: $keep/test.log"
fi
exit $failed
