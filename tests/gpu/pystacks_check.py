#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pystacks_check.py - the checks of tests/gpu/pystacks.sh (exit 0 pass, 1 fail; prints a table).

  lines SP.json TORCH.json SCRIPT   `stepprof report --by line --json` against pyline_train.py's
        torch.profiler rows (torch_trace_lines.py on its Chrome trace). Rows are compared per
        (file name, function) of the innermost frame of the program's own code: torch.profiler
        names a frame by its function's first line in some versions and by the line running in
        others, stepprof by the line running (pyline_train.py has one kernel line per function);
        whether the lines are equal is printed, not judged. Kernels without such a frame (the
        autograd thread's backward; stepprof's [backward] rows, which name the line that called
        backward()) form one "(none)" row on both sides. Pass: the two top-10s
        share at least 8 keys, every key with >= 2% of kernel time on one side is in the other's
        top 12, and its shares differ by at most 3 points or 30%. torch's key_averages rows, when
        present, are compared with the trace's rows by the same rule and printed (a cross-check
        that does not decide).
  memory MEMORY.txt SCRIPT          `stepprof memory` text: the rows of 768 MiB and 512 MiB blocks
        (the largest alive at the peak) name pyline_train.py's lines marked BIG_A and BIG_B, and
        their owner, PyTorch's caching allocator.
  cost DIR STEPPROF SKIP ACTIVE     bench.py worker runs DIR/<wl>-<stacks>-r<round>/ (out.log,
        trace/): median in-window step per run, ratio to stacks=false of the same round, cost per
        launch, the share of kernel time with a Python frame; pass if mlp/python <= 1.10x."""
import glob
import json
import os
import re
import statistics
import subprocess
import sys


def marked_line(script, tag):
    with open(script) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return i
    raise SystemExit(f"no line marked {tag} in {script}")


def torch_keys(rows):
    """Torch rows ({"FILE|FUNC|LINE" or "(none)": {"ns", ...}}) per (file name, function): ns per
    key and the line of each key."""
    ns, line = {}, {}
    for k, r in (rows or {}).items():
        if k == "(none)":
            key = k
        else:
            f, func, ln = k.rsplit("|", 2)
            key = f"{os.path.basename(f)}|{func.split('.')[-1]}"
            line.setdefault(key, int(ln))
        ns[key] = ns.get(key, 0) + r["ns"]
    return ns, line


def disagree(spk, trk, names=("stepprof", "torch")):
    """The problems between two {key: ns} tables (the pass rule of the module comment)."""
    ts, tt = sum(spk.values()) or 1, sum(trk.values()) or 1
    top_s = sorted(spk, key=lambda k: -spk[k])
    top_t = sorted(trk, key=lambda k: -trk[k])
    problems = []
    common = set(top_s[:10]) & set(top_t[:10])
    if len(common) < 8:
        problems.append(f"the top-10s share {len(common)} keys")
    for side, mine, other, top_other, tm, to in ((names[0], spk, trk, top_t, ts, tt), (names[1], trk, spk, top_s, tt, ts)):
        for k in sorted(mine, key=lambda k: -mine[k])[:10]:
            a, b = mine[k] / tm, other.get(k, 0) / to
            if a < 0.02:
                continue
            if k not in top_other[:12]:
                problems.append(f"{short(k)} ({100 * a:.1f}% in {side}) is not in the other's top 12")
            elif abs(a - b) > max(0.03, 0.3 * max(a, b)):
                problems.append(f"{short(k)}: {100 * a:.1f}% in {side}, {100 * b:.1f}% in the other")
    return problems


def short(k):
    return k if k == "(none)" else k.replace("|", ":")


def lines(sp_json, torch_json, script):
    sp = json.load(open(sp_json))["lines"]
    doc = json.load(open(torch_json))
    tr = doc["rows"]
    spk, sp_line = {}, {}
    for r in sp:
        if r.get("what") == "no launch record":  # torch.profiler has no op for such kernels either
            continue
        # torch.profiler has no Python frame for the autograd thread's kernels: stepprof's
        # [backward] rows (the line that called backward()) count as "(none)" here
        mine = r["user"] and not r.get("backward")
        key = f"{os.path.basename(r['file'])}|{r['function'].split('.')[-1]}" if mine else "(none)"
        spk[key] = spk.get(key, 0) + r["total_ns"]
        if mine:
            sp_line.setdefault(key, r["line"])
    trk, tr_line = torch_keys(tr)
    ts, tt = sum(spk.values()) or 1, sum(trk.values()) or 1
    top_s = sorted(spk, key=lambda k: -spk[k])
    top_t = sorted(trk, key=lambda k: -trk[k])
    print(f"torch {doc.get('torch', '?')}: {json.dumps(doc.get('summary', {}))}")
    print(f"{'rank':>4}  {'stepprof (python stacks)':<34} {'share':>6}   {'torch.profiler with_stack':<34} {'share':>6}")
    for i in range(10):
        a = top_s[i] if i < len(top_s) else ""
        b = top_t[i] if i < len(top_t) else ""
        la = f"{short(a)}:{sp_line.get(a, '')}" if a else ""
        lb = f"{short(b)}:{tr_line.get(b, '')}" if b else ""
        print(f"{i + 1:>4}  {la:<34} {100 * spk.get(a, 0) / ts:5.1f}%   {lb:<34} {100 * trk.get(b, 0) / tt:5.1f}%")
    problems = disagree(spk, trk)
    common = [k for k in set(top_s[:10]) & set(top_t[:10]) if k != "(none)"]
    same = sorted(k for k in common if sp_line.get(k) == tr_line.get(k))
    diff = sorted(f"{short(k)} {sp_line.get(k)}/{tr_line.get(k)}" for k in common if k not in same)
    print(f"kernels: stepprof {sum(r['kernels'] for r in sp)}, torch {sum(r['kernels'] for r in tr.values())}; "
          f"lines equal in {len(same)} of {len(common)} common functions"
          + (f" (stepprof/torch: {', '.join(diff)})" if diff else ""))
    # the cross-check: torch's own key_averages(group_by_stack_n), against the trace's rows
    ka = doc.get("key_averages")
    if ka is None:
        print(f"cross-check: no key_averages rows ({doc.get('key_averages_note', 'not recorded')})")
    else:
        kak, _ = torch_keys(ka)
        kp = disagree(trk, kak, ("the trace", "key_averages"))
        note = doc.get("key_averages_note") or ""
        print(f"cross-check: torch's key_averages(group_by_stack_n) {'agrees with' if not kp else 'differs from'} "
              f"the trace's rows" + (f" ({note})" if note else "") + "".join(f"\n  {p}" for p in kp))
    for p in problems:
        print("problem:", p)
    return not problems


def memory(text_path, script):
    want = {"768.00MiB": marked_line(script, "BIG_A"), "512.00MiB": marked_line(script, "BIG_B")}
    rows = [l for l in open(text_path) if re.match(r"^ +[0-9.]+[KMG]iB +\w", l)]
    ok = True
    for size, line in want.items():
        hit = [r for r in rows if r.split()[0] == size]
        tail = f"pyline_train.py:{line})"
        owner = "  [PyTorch caching allocator]"  # the owner stepprof tells (torch.empty: its segments)
        row = hit[0].rstrip() if hit else ""
        site = row[:-len(owner)] if row.endswith(owner) else row
        if not hit or not site.endswith(tail) or site == row:
            print(f"problem: the {size} block's row {row.strip() or '(none)'!r} does not end with {tail + owner!r}")
            ok = False
        else:
            print(f"{size} block: {hit[0].strip()}")
    return ok


def cost(root, stepprof, skip, active):
    lo, hi = skip + 2, skip + active - 2  # recorded: skip .. skip+active-1; away from the edges
    med, share, launches = {}, {}, {}
    for d in sorted(glob.glob(os.path.join(root, "*-r*"))):
        wl, st, rnd = re.match(r"^(\w+)-(\w+)-r(\d+)$", os.path.basename(d)).groups()
        times = None
        for line in open(os.path.join(d, "out.log"), errors="replace"):
            if line.startswith("BENCH "):
                times = json.loads(line[6:])["times_ms"]
        if not times:
            print(f"problem: {d}: no BENCH line")
            return False
        med[(wl, st, rnd)] = statistics.median(times[lo:hi])
        tr = glob.glob(os.path.join(d, "trace", "**", "*.sptrace"), recursive=True)
        if not tr:
            print(f"problem: {d}: no trace")
            return False
        rep = json.loads(subprocess.run([stepprof, "report", "--by", "line", "--json", tr[0]], capture_output=True,
                                        text=True).stdout or "{}")
        w = (rep.get("windows") or [{}])[0]
        if w.get("steps"):
            launches.setdefault(wl, w["kernels"] / w["steps"])
        rows = rep.get("lines") or []
        tot = sum(r["total_ns"] for r in rows) or 1
        share[(wl, st, rnd)] = sum(r["total_ns"] for r in rows if r["file"]) / tot
    ok = True
    print(f"{'workload':<8} {'stacks':<7} {'median step ms (rounds)':<26} {'vs false':>8} {'per launch':>11} {'py share':>8}")
    for wl in ("mlp", "add"):
        for st in ("false", "python", "both"):
            rounds = sorted(r for (w, s, r) in med if w == wl and s == st)
            ms = [med[(wl, st, r)] for r in rounds]
            ratios = [med[(wl, st, r)] / med[(wl, "false", r)] for r in rounds if (wl, "false", r) in med]
            ratio = statistics.median(ratios) if ratios else float("nan")
            base = statistics.median([med[(wl, "false", r)] for r in rounds if (wl, "false", r) in med] or [0])
            per = (statistics.median(ms) - base) * 1e3 / launches[wl] if launches.get(wl) else float("nan")
            sh = statistics.median([share[(wl, st, r)] for r in rounds])
            print(f"{wl:<8} {st:<7} {', '.join(f'{m:.3f}' for m in ms):<26} {ratio:7.3f}x {per:8.2f} us {100 * sh:7.1f}%")
            if st != "false" and sh < (0.9 if wl == "add" else 0.2):
                print(f"problem: {wl} stacks={st}: only {100 * sh:.1f}% of kernel time has a Python frame")
                ok = False
            if wl == "mlp" and st == "python" and not ratio <= 1.10:
                print(f"problem: mlp stacks=python costs {ratio:.3f}x in a window (target 1.10x)")
                ok = False
    print(f"launches per step: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(launches.items())))
    return ok


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    ok = {"lines": lambda: lines(*args), "memory": lambda: memory(*args),
          "cost": lambda: cost(args[0], args[1], int(args[2]), int(args[3]))}[cmd]()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
