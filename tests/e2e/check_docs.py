#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# check_docs.py - the project's Markdown read as GitHub renders it (CommonMark, with markdown-it,
# Debian's python3-markdown-it) and checked against the tree and the binary:
#  - every code fence closes, and no line inside a fence starts one (a "``` text" line does not
#    close a fence: the rest of the page would render as code);
#  - every relative link and image resolves to a file or folder of the tree, and every #anchor to a
#    heading of its page (GitHub's anchors: lower case, punctuation dropped, spaces to '-', -N for
#    repeats);
#  - with --commands STEPPROF: in the pages named by --run (README.md, docs/RECIPES.md), every
#    `stepprof CMD ...` in inline code names a command, options of that command (the table that
#    `stepprof --complete CMD` prints) and values they take; one without placeholders (TRACE,
#    FILE, N, ...) runs on a shipped trace (tests/golden/small.sptrace) without a usage error.
#    Their ```sh blocks are walked by tests/e2e/readme_walk.sh. Every `stepprof convert ... -o NAME`
#    there, inline or in a block, names a file the TensorBoard plugin finds (*.pt.trace.json[.gz]),
#    a folder (DIR/) or stdout (-).
#  - with --measured PAGE: no measured number (a ratio, a percentage, a time, a size) in a paragraph,
#    list item or table row of PAGE without a link in it (to where it was measured).
# usage: check_docs.py ROOT [--commands STEPPROF --run PAGE ...] [--measured PAGE] PAGE.md ...
# Prints one line per problem; exits 1 if any.
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

from markdown_it import MarkdownIt

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fences(path, lines):
    """Problems with the code fences of lines (CommonMark's rules)."""
    out, open_at, marker = [], None, ""
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if open_at is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                open_at, marker = n, m.group(1)
            continue
        if m and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker):
            if m.group(2).strip():
                out.append(f"{path}:{n}: '{line.strip()[:40]}' does not close the fence of line {open_at}: "
                           "nothing may follow the closing fence")
                continue
            open_at = None
    if open_at is not None:
        out.append(f"{path}:{open_at}: this fence is never closed: the rest of the page renders as code")
    return out


def plain(tokens):
    """The text of an inline token list as GitHub shows it (code spans' content included)."""
    return "".join(t.content for t in tokens if t.type in ("text", "code_inline", "html_inline"))


def slug(text, seen):
    s = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


def parse(md, path):
    text = open(path, encoding="utf-8").read()
    return text, md.parse(text)


def anchors(tokens):
    seen, out = {}, set()
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            out.add(slug(plain(tokens[i + 1].children or []), seen))
    return out


def links(tokens):
    """(href, line) of every link and image."""
    for t in tokens:
        for c in t.children or []:
            if c.type == "link_open":
                yield c.attrs.get("href", ""), (t.map or [0])[0] + 1
            elif c.type == "image":
                yield c.attrs.get("src", ""), (t.map or [0])[0] + 1


def check_links(md, root, path, tokens, cache):
    out = []
    for href, line in links(tokens):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href):  # http:, https:, mailto:
            continue
        target, _, anchor = href.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if not os.path.exists(dest):
            out.append(f"{os.path.relpath(path, root)}:{line}: link to '{href}': no such file")
            continue
        if anchor and dest.endswith(".md"):
            if dest not in cache:
                cache[dest] = anchors(parse(md, dest)[1])
            if anchor not in cache[dest]:
                out.append(f"{os.path.relpath(path, root)}:{line}: link to '{href}': "
                           f"{os.path.relpath(dest, root)} has no heading with that anchor")
    return out


PLACEHOLDER = re.compile(r"(^|[^A-Za-z_])[A-Z][A-Z_]*([^A-Za-z_]|$)|\.\.\.|\$|\*|<|\|")


def commands_of(tokens):
    """(text, line) of every inline code span that starts with 'stepprof '."""
    for t in tokens:
        for c in t.children or []:
            if c.type == "code_inline" and c.content.startswith("stepprof "):
                yield c.content, (t.map or [0])[0] + 1


TB_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$|/$|^-$")


def check_tb_names(root, path, text):
    """`stepprof convert ... -o NAME` lines (inline or in blocks) whose NAME TensorBoard would skip."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"stepprof convert\b[^`#\n]*?(?:-o|--output)[ =]([^\s`]+)", line):
            if not TB_NAME.search(m.group(1)):
                out.append(f"{os.path.relpath(path, root)}:{n}: convert -o {m.group(1)}: not a name the TensorBoard "
                           "plugin finds (*.pt.trace.json.gz)")
    return out


def check_commands(sp, root, path, tokens, tables):
    out, golden = [], os.path.join(root, "tests/golden/small.sptrace")
    trace_ops = {"report": [golden], "convert": [golden], "dump": [golden], "memory": [golden],
                 "stacks": [golden], "steps": [golden], "diff": [golden, golden]}
    where = os.path.relpath(path, root)
    for text, line in commands_of(tokens):
        words = text.split()
        cmd = words[1] if len(words) > 1 else ""
        if cmd.startswith("-"):
            continue  # stepprof --version, --help
        if cmd not in tables:
            out.append(f"{where}:{line}: `{text}`: no command '{cmd}'")
            continue
        opts = tables[cmd]
        for i, w in enumerate(words[2:], 2):
            if w == "--":
                break
            name = w.split("=", 1)[0]
            if name.startswith("--") and name not in opts:
                out.append(f"{where}:{line}: `{text}`: {cmd} has no option {name} (it has: {' '.join(sorted(opts))})")
            elif name.startswith("--") and i + 1 < len(words) and opts[name] not in ("-", None):
                values = [v for v in opts[name].split("|") if re.search("[a-z]", v)]
                v = w.split("=", 1)[1] if "=" in w else words[i + 1]
                if values and not any(x.isupper() for x in opts[name].split("|")) and v not in values \
                        and not PLACEHOLDER.search(v):
                    out.append(f"{where}:{line}: `{text}`: {name} takes {', '.join(values)}, not '{v}'")
        last = words[-1].split("=", 1)[0]
        if PLACEHOLDER.search(" ".join(words[2:])) or cmd in ("run", "trigger", "autostep") or \
                (last.startswith("--") and "=" not in words[-1] and opts.get(last, "-") != "-"):
            continue  # a form with placeholders, a mention of an option, or one that needs a program
        args = words[1:] + (trace_ops.get(cmd, []) if not any(w.endswith(".sptrace") for w in words) else [])
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sp] + args, cwd=d, capture_output=True, text=True, timeout=60,
                               env={**os.environ, "STEPPROF_NO_PROGRESS": "1"})
        if r.returncode == 2:
            out.append(f"{where}:{line}: `{text}` run as `stepprof {shlex.join(args)}`: usage error: "
                       f"{r.stderr.strip().splitlines()[0] if r.stderr.strip() else ''}")
    return out


MEASURE = re.compile(r"\d(\.\d+)?\s*(x\b|×|%|µs|us\b|ms\b|ns\b|s\b|[KMG]i?B\b)")


def check_measured(root, path, text):
    """Blocks of text (paragraphs, items, rows; code left out) with a measure and no link."""
    out, block, start, in_code = [], [], 0, False
    for n, line in enumerate(text.splitlines() + [""], 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        new = not line.strip() or line.lstrip().startswith(("- ", "| ", "#"))
        if new and block:
            joined = " ".join(block)
            if MEASURE.search(re.sub(r"`[^`]*`", "", joined)) and "](" not in joined:
                out.append(f"{os.path.relpath(path, root)}:{start}: a measured number without a link to "
                           f"where it was measured: {joined.strip()[:80]}")
            block = []
        if line.strip():
            if not block:
                start = n
            block.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--commands", help="the stepprof binary: check `stepprof ...` in --run pages")
    ap.add_argument("--run", action="append", default=[])
    ap.add_argument("--measured", action="append", default=[])
    a = ap.parse_args()
    md = MarkdownIt("commonmark").enable("table")
    tables = {}
    if a.commands:
        for cmd in subprocess.run([a.commands, "--complete"], capture_output=True, text=True).stdout.split():
            rows = subprocess.run([a.commands, "--complete", cmd], capture_output=True, text=True).stdout
            tables[cmd] = {w[0]: w[1] for w in (l.split() for l in rows.splitlines()) if w and w[0].startswith("--")}
    problems, cache = [], {}
    for page in a.pages:
        path = os.path.abspath(page)
        text, tokens = parse(md, path)
        problems += fences(os.path.relpath(path, a.root), text.splitlines())
        problems += check_links(md, a.root, path, tokens, cache)
        if any(os.path.samefile(path, p) for p in a.measured):
            problems += check_measured(a.root, path, text)
        if a.commands and any(os.path.samefile(path, p) for p in a.run):
            problems += check_commands(a.commands, a.root, path, tokens, tables)
            problems += check_tb_names(a.root, path, text)
    for p in problems:
        print(p)
    print(f"check_docs: {len(a.pages)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
