# SPDX-License-Identifier: MIT
# pythons.sh - sourced by the Python bridge's tests (pybridge.sh, pymem.sh, pyops.sh), not run by
# itself: PYS, the CPythons to run (Debian's python3 and every pyenv 3.10-3.13 present, or only
# those in PYBRIDGE_PYTHONS="PATH ..." for a quicker run); says which versions are absent; ends the
# test (exit 0, said) where there is no /usr/bin/python3.
PYS=()
for p in ${PYBRIDGE_PYTHONS:-/usr/bin/python3 /root/.pyenv/versions/3.10*/bin/python3 /root/.pyenv/versions/3.11*/bin/python3 \
	/root/.pyenv/versions/3.12*/bin/python3 /root/.pyenv/versions/3.13*/bin/python3}; do
	[ -x "$p" ] && PYS+=("$p")
done
for v in 3.10 3.11 3.12 3.13; do
	ls /root/.pyenv/versions/$v*/bin/python3 >/dev/null 2>&1 || echo "skip CPython $v: no /root/.pyenv/versions/$v*/bin/python3 here"
done
[ -x /usr/bin/python3 ] || { echo "skip: no /usr/bin/python3"; exit 0; }
