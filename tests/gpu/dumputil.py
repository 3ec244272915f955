#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dumputil.py - reads the text of `stepprof dump TRACE` (cli/cmd_dump.c): the "key: value"
header lines, then one record per line, "KIND key=value key=\"quoted\" ...". Fields are kept as
text and converted on request, so a field added later never breaks a reader and a field that
is missing is reported by name. Never writes anything.

CLI:  dumputil.py summary DUMP.txt    (record counts per kind, header, windows and steps)"""
import collections
import re
import subprocess
import sys
from dataclasses import dataclass, field

FIELD_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)')
HEADER_RE = re.compile(r"^([a-z_]+): ?(.*)$")
ESC_RE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)")


class DumpError(Exception):
    """The dump cannot be produced or read, or lacks a field a check needs."""


def _unescape(s):
    return ESC_RE.sub(lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else m.group(1), s)


@dataclass
class Rec:
    kind: str                     # "kernel", "nccl", "alloc", ...
    f: dict                       # field -> text (quotes removed, escapes resolved)
    line: int                     # 1-based line in the dump

    def has(self, key):
        return key in self.f

    def text(self, key):
        if key not in self.f:
            raise DumpError(f"line {self.line}: {self.kind} record has no {key}= field: {self.f}")
        return self.f[key]

    def int(self, key, default=None):
        """Integer field (decimal or 0x hex); default for '-' or, if given, for a missing field."""
        if key not in self.f and default is not None:
            return default
        v = self.text(key)
        if v == "-":
            return default
        try:
            return int(v, 16) if v.lower().startswith(("0x", "-0x")) else int(v)
        except ValueError as e:
            raise DumpError(f"line {self.line}: {self.kind} {key}={v!r} is not an integer") from e

    def pair(self, key):
        """'1/2' -> (1, 2)."""
        a, _, b = self.text(key).partition("/")
        try:
            return int(a), int(b)
        except ValueError as e:
            raise DumpError(f"line {self.line}: {self.kind} {key}={self.f[key]!r} is not N/M") from e

    @property
    def start(self):
        return self.int("start")

    @property
    def end(self):
        return self.start + self.int("dur", 0)


@dataclass
class Dump:
    path: str
    header: dict = field(default_factory=dict)
    recs: list = field(default_factory=list)
    truncated: bool = False

    def of(self, *kinds):
        return [r for r in self.recs if r.kind in kinds]

    @property
    def rank(self):
        return int(self.header.get("rank", "-1"))

    def features(self):
        """Feature names of the header ('features: 0x53 kernels,memcpy,...')."""
        parts = self.header.get("features", "").split(None, 1)
        return set(parts[1].split(",")) if len(parts) > 1 else set()

    def steps(self):
        """Recorded step records as {number: (start, end)}; raises on a repeated number."""
        out = {}
        for r in self.of("step"):
            n = r.int("number")
            if n in out:
                raise DumpError(f"{self.path}: step {n} recorded twice (line {r.line})")
            out[n] = (r.start, r.end)
        return out

    def windows(self):
        """[(start of window_begin, start of window_end or None)] in file order."""
        wins = []
        for r in self.of("window_begin", "window_end"):
            if r.kind == "window_begin":
                wins.append([r.start, None])
            elif wins:
                wins[-1][1] = r.start
        return [tuple(w) for w in wins]


def step_of(steps, t):
    """The step number whose [start, end) holds t, or None. steps as from Dump.steps()."""
    for n, (a, b) in steps.items():
        if a <= t < b:
            return n
    return None


def parse(text, path="<dump>"):
    """Parses the whole dump text. Raises DumpError on a line that is neither header nor record."""
    d = Dump(path=path)
    in_header = True
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            d.truncated |= line.strip() == "# truncated"
            continue
        if in_header:
            m = HEADER_RE.match(line)
            if m and "=" not in line.split(":", 1)[0]:
                d.header[m.group(1)] = m.group(2)
                continue
            in_header = False
        kind, _, rest = line.partition(" ")
        if not re.fullmatch(r"[a-z_]+", kind):
            raise DumpError(f"{path}:{i}: not a record line: {line[:120]!r}")
        fields = {}
        for m in FIELD_RE.finditer(rest):
            v = m.group(2)
            fields[m.group(1)] = _unescape(v[1:-1]) if v.startswith('"') and len(v) >= 2 else v
        d.recs.append(Rec(kind, fields, i))
    if "version" not in d.header:
        raise DumpError(f"{path}: no 'version:' header line: not `stepprof dump` output")
    return d


def load(path):
    """Reads a saved dump (text) file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse(f.read(), path)
    except OSError as e:
        raise DumpError(f"{path}: {e}") from e


def run_dump(stepprof, trace):
    """Runs `stepprof dump TRACE` and parses its output. Raises DumpError if it fails."""
    r = subprocess.run([stepprof, "dump", trace], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise DumpError(f"stepprof dump {trace} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return parse(r.stdout, trace)


def main(argv):
    if len(argv) != 3 or argv[1] != "summary":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        d = load(argv[2])
        steps = d.steps()
    except DumpError as e:
        print(f"dumputil: {e}", file=sys.stderr)
        return 1
    print(f"{d.path}: rank {d.rank}, features {sorted(d.features())}, {len(d.recs)} records"
          f"{' (truncated)' if d.truncated else ''}")
    print(f"windows {d.windows()}; steps {sorted(steps)}")
    for kind, n in sorted(collections.Counter(r.kind for r in d.recs).items()):
        print(f"    {n:8d}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
