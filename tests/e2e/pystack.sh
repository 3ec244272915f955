#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pystack.sh - Python frames read in-process (collector/stacks/pystack.c) against real interpreters:
# tests/pywalk/check.py (the calling thread's frames) and tests/pywalk/backward.py (a thread without
# Python borrowing the frames of the thread blocked in backward(), and reading them while they
# change) under Debian's /usr/bin/python3 (required) and under every other CPython 3.10-3.13 found
# in pyenv (checked when present), through the test library libpywalk.so.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x /usr/bin/python3 ] || fail "no /usr/bin/python3 (make deps installs it)"
if ldd "$B/tests/libpywalk.so" | grep -Eq 'lib(a|ub)san'; then # a sanitizer runtime must load first
	echo "skipped: pystack (a sanitizer build: python3 cannot load the test library)"
	exit 77
fi
for py in /usr/bin/python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[0-3].*/bin/python3; do
	[ -x "$py" ] || continue
	for check in check.py backward.py; do
		out=$("$py" "$R/tests/pywalk/$check" "$B/tests/libpywalk.so" 2>&1) || fail "$py $check: $out"
		echo "$out"
	done
done
echo "pystack: ok"
