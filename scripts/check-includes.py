#!/usr/bin/python3
"""check-includes.py - the front ends' boundary of docs/ARCHITECTURE.md: a file of preload/ includes
no header of collector/ but collector/collector.h (the core's one API, which re-exports what the
hooks need). Usage: check-includes.py [ROOT] (default: the current folder). Prints each breach as
FILE:LINE: INCLUDE; exits 1 if there is one, 0 otherwise."""
import glob, os, re, sys

# folder -> the collector/ headers its files may include
ALLOWED = {'preload': {'collector/collector.h'}}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    bad = 0
    for folder, allowed in ALLOWED.items():
        files = sorted(glob.glob(os.path.join(root, folder, '**', '*.[ch]'), recursive=True))
        for f in files:
            for n, line in enumerate(open(f, encoding='utf-8', errors='replace'), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = os.path.normpath(m.group(1))
                # a relative include resolves from the file's folder first, then from the root (-I.)
                near = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(f), inc)), root)
                for path in (inc, near):
                    if (path == 'collector' or path.startswith('collector/')) and path not in allowed:
                        print('%s:%d: %s (%s/ includes only %s of collector/)' %
                              (os.path.relpath(f, root), n, m.group(1), folder, ', '.join(sorted(allowed))))
                        bad = 1
                        break
    return bad

if __name__ == '__main__':
    sys.exit(main())
