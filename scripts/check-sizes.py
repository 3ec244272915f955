#!/usr/bin/python3
"""check-sizes.py - the size rules of docs/ARCHITECTURE.md: no product .c file (cli/, collector/, config/,
preload/, trace/) over 800 lines, no function over 80 lines in the folders named (collector/ and preload/
by default). Prints each breach; exits 1 if there is one. Run from the repository root (make check-sizes).
A function is counted from its signature to its closing brace at column 0 (the house style puts
a function's braces there and no other brace alone at column 0)."""
import glob, re, sys

FILE_MAX, FUNC_MAX = 800, 80

def functions(path):
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    out = []
    for i, l in enumerate(lines):
        if l == '{':
            j = i - 1  # the signature: back to the line that starts at column 0 with a name
            while j > 0 and (lines[j].startswith((' ', '\t')) or lines[j] == ''):
                j -= 1
            m = re.search(r'([A-Za-z_]\w*)\s*\(', lines[j])
            k = i + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            out.append((m.group(1) if m else '?', j + 1, k - j + 1))
    return out

def main():
    bad = 0
    product = [f for d in ('cli', 'collector', 'config', 'preload', 'trace') for f in sorted(glob.glob(d + '/*.c'))]
    for f in product:
        n = sum(1 for _ in open(f, encoding='utf-8', errors='replace'))
        if n > FILE_MAX:
            print(f'{f}: {n} lines (over {FILE_MAX})')
            bad += 1
    for d in sys.argv[1:] or ['collector', 'preload']:
        for f in sorted(glob.glob(d + '/*.c')):
            for name, line, n in functions(f):
                if n > FUNC_MAX:
                    print(f'{f}:{line}: {name}() is {n} lines (over {FUNC_MAX})')
                    bad += 1
    return 1 if bad else 0

sys.exit(main())
