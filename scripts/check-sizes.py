#!/usr/bin/python3
"""check-sizes.py - the size rules of docs/ARCHITECTURE.md over every product folder (cli/, collector/,
config/, decide/, preload/, trace/, each with every folder below it): no .c file over 800 lines, no
function in a .c or .h file over 80 lines. Prints each breach; exits 1 if there is one.
Usage: check-sizes.py [ROOT] (default: the current directory; make check-sizes runs it at the root).
A function is counted from its signature to its closing brace at column 0 (the house style puts a
function's braces there and no other brace alone at column 0)."""
import os, re, sys

FILE_MAX, FUNC_MAX = 800, 80
PRODUCT = ('cli', 'collector', 'config', 'decide', 'preload', 'trace')

def functions(path):
    """(name, first line, length) of each function in the file at path."""
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    out = []
    for i, l in enumerate(lines):
        if l == '{':  # the signature: back to the line that starts at column 0 with a name
            j = i - 1
            while j > 0 and (lines[j].startswith((' ', '\t')) or lines[j] == ''):
                j -= 1
        elif re.match(r'[A-Za-z_][^=;]*\)\s*\{\s*$', l):  # a signature and its brace on one line
            j = i
        else:
            continue
        m = re.search(r'([A-Za-z_]\w*)\s*\(', lines[j])
        k = i + 1
        while k < len(lines) and lines[k] != '}':
            k += 1
        out.append((m.group(1) if m else '?', j + 1, k - j + 1))
    return out

def sources(root):
    """Every product .c and .h file under root, as a path relative to it, sorted."""
    out = []
    for d in PRODUCT:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            out += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames if f.endswith(('.c', '.h'))]
    return sorted(out)

def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    bad = 0
    for f in sources(root):
        path = os.path.join(root, f)
        if f.endswith('.c'):
            n = sum(1 for _ in open(path, encoding='utf-8', errors='replace'))
            if n > FILE_MAX:
                print(f'{f}: {n} lines (over {FILE_MAX})')
                bad += 1
        for name, line, n in functions(path):
            if n > FUNC_MAX:
                print(f'{f}:{line}: {name}() is {n} lines (over {FUNC_MAX})')
                bad += 1
    return 1 if bad else 0

sys.exit(main())
