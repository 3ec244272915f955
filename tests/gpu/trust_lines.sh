#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trust_lines.sh [BUILD_DIR] - issue 34 items 4 and 5 on a GPU machine, in one call (under 2 minutes
# on one H200): run from the repository root; without BUILD_DIR it lays dist/stepprof (make dist)
# flat as a build dir, as pystacks.sh does. Prints PASS/FAIL lines and tables; exit 0 only if every
# check passes. Works in ${WORK:-/tmp/stepprof-trust-lines}; with OUT set, copies the traces and
# reports there. Two programs written here (no other branch needed), each under stepprof with
# stacks = python and an api marker on cudaDeviceSynchronize* (each step ends with one):
#  1. gradscaler: a ResNet-18 (torchvision's, else timm's, else a small ResNet written here) under
#     torch.autocast and GradScaler, SGD, 14 steps, window of 6.
#  2. trainer (if transformers imports): a tiny BERT for sequence classification from a config (no
#     download), HF Trainer, 24 steps, window of 8 (a callback synchronises at each step's end).
# Checks per program: `report --by line` leaves under 5% of kernel time without a line (no Python
# frame, no launch stack, no launch record), backward kernels carry the line that called
# backward() ([backward] rows); the trainer's --by line turns to --by frame by itself (its own
# code is trainer.train()); `memory` classifies the GPU blocks and its PyTorch caching allocator's
# own peak is within 5% of torch.cuda.max_memory_reserved() that the program prints.
set -u
R=$(pwd)
W=${WORK:-/tmp/stepprof-trust-lines}
PY=${PYTHON:-python3}
if [ $# -ge 1 ]; then
	B=$(cd "$1" && pwd)
else
	B=/tmp/sptl-build
	rm -rf "$B" && mkdir -p "$B" && cp dist/stepprof/bin/stepprof dist/stepprof/lib/* "$B/" || { echo "FAIL no dist/stepprof (make dist)"; exit 2; }
fi
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH PYTORCH_CUDA_ALLOC_CONF
[ -n "${OUT:-}" ] && { mkdir -p "$OUT" || exit 2; }
rm -rf "$W" && mkdir -p "$W" || exit 2
cd "$W" || exit 2
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# ini FILE OUTDIR SKIP ACTIVE: one window of ACTIVE steps after SKIP (a warmup step included)
ini() {
	printf '[profile]\nenabled = true\noutput = %s\n[schedule]\nskip_first = %s\nwait = 0\nwarmup = 1\nactive = %s\nrepeat = 1\n' \
		"$2" "$(($3 - 1))" "$4" >"$1"
	printf '[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n[activities]\nstacks = python\nstack_depth = 64\n' >>"$1"
	"$B/stepprof" check "$1" >/dev/null || { echo "stepprof check $1 failed"; cat "$1"; return 1; }
}

cat >gradscaler.py <<'EOF'
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F


def resnet18():
    try:
        import torchvision
        return torchvision.models.resnet18(num_classes=100), "torchvision"
    except Exception:
        pass
    try:
        import timm
        return timm.create_model("resnet18", pretrained=False, num_classes=100), "timm"
    except Exception:
        pass

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
    for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
        layers.append(Block(cin, cout, stride))
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)]
    return nn.Sequential(*layers), "inline"


def main(steps):
    torch.manual_seed(0)
    model, src = resnet18()
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(64, 3, 128, 128, device="cuda")
    y = torch.randint(0, 100, (64,), device="cuda")
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)  # FORWARD
        scaler.scale(loss).backward()  # BACKWARD
        scaler.step(opt)  # STEP
        scaler.update()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    print(f"gradscaler ok model={src} max_memory_reserved={torch.cuda.max_memory_reserved()}", flush=True)


main(int(sys.argv[1]))
EOF

cat >trainer.py <<'EOF'
import os
import sys
import tempfile
import torch
from transformers import (BertConfig, BertForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments)


class Sync(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        torch.cuda.synchronize()


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (n, 64), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(64, dtype=torch.long), "labels": self.labels[i]}


def main(steps):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=1024, max_position_embeddings=128, num_labels=2)
    model = BertForSequenceClassification(cfg)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=steps, per_device_train_batch_size=32,
                                 learning_rate=1e-4, report_to=[], save_strategy="no", logging_strategy="no",
                                 dataloader_num_workers=0, disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=Data(32 * steps), callbacks=[Sync()])
        trainer.train()  # TRAIN
    print(f"trainer ok max_memory_reserved={torch.cuda.max_memory_reserved()}", flush=True)


main(int(sys.argv[1]))
EOF

cat >check.py <<'EOF'
"""check.py NAME LINES.json MEMORY.json RESERVED [auto]: the share of kernel time without a line (< 5%),
[backward] rows present, the by-frame switch (with auto), the caching allocator's own peak beside
max_memory_reserved (within 5%). Prints a table; exit 1 on a failed check."""
import json
import sys

name, lines_json, mem_json, reserved = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
want_auto = len(sys.argv) > 5 and sys.argv[5] == "auto"
rows = json.load(open(lines_json))["lines"]
total = sum(r["total_ns"] for r in rows) or 1
none = sum(r["total_ns"] for r in rows if r["file"] is None)
back = sum(r["total_ns"] for r in rows if r.get("backward"))
bad = []
print(f"{name}: {len(rows)} rows, by {rows[0]['by'] if rows else '-'}{' (chosen by itself)' if rows and rows[0]['auto'] else ''}")
for r in sorted(rows, key=lambda r: -r["total_ns"])[:12]:
    where = f"{r['file']}:{r['line']} {r['function']}" if r["file"] else f"({r['what']})"
    print(f"  {100 * r['total_ns'] / total:5.1f}%  {where}{' [backward]' if r.get('backward') else ''}")
print(f"{name}: kernel time without a line {100 * none / total:.1f}% (target < 5%), backward rows {100 * back / total:.1f}%")
if none >= 0.05 * total:
    bad.append(f"{100 * none / total:.1f}% of kernel time without a line")
if back == 0:
    bad.append("no [backward] row")
if want_auto and not (rows and rows[0]["by"] == "frame" and rows[0]["auto"]):
    bad.append("--by line did not turn to --by frame by itself")
mem = json.load(open(mem_json))
own = None
for w in mem["windows"]:
    for s in w["series"]:
        if "owners" not in s:
            continue
        print(f"{name}: window {w['id']} {s['label']}: peak {s['peak_bytes'] / 2**20:.1f} MiB, since start "
              f"{s['peak_since_start_bytes'] / 2**20:.1f} MiB; torch max_memory_reserved {reserved / 2**20:.1f} MiB")
        for o in s["owners"]:
            print(f"    {o['label']:<36} at the peak {o['bytes_at_peak'] / 2**20:9.1f} MiB ({o['blocks_at_peak']} blocks), "
                  f"own peak {o['own_peak_bytes'] / 2**20:9.1f} MiB")
            if o["owner"] == "torch_caching_allocator":
                own = max(own or 0, o["own_peak_bytes"])
if own is None:
    bad.append("no block told as PyTorch's caching allocator")
elif abs(own - reserved) > 0.05 * reserved:
    bad.append(f"caching allocator's own peak {own} bytes is not within 5% of max_memory_reserved {reserved}")
for b in bad:
    print(f"problem: {b}")
sys.exit(1 if bad else 0)
EOF

# run NAME STEPS SKIP ACTIVE [auto]: the program under stepprof, then its checks
run() {
	local name=$1 steps=$2 skip=$3 active=$4 auto=${5:-}
	ini "$name.ini" "$W/$name" "$skip" "$active" || { fail "$name: bad configuration"; return; }
	local t0=$SECONDS
	STEPPROF_CONFIG=$W/$name.ini LD_PRELOAD=$B/libstepprof.so timeout 150 "$PY" "$name.py" "$steps" >"$name.log" 2>&1 ||
		{ fail "$name: exited $?: $(tail -5 "$name.log")"; return; }
	echo "$name: $((SECONDS - t0)) s under stepprof"
	grep -a '^stepprof:' "$name.log" | head -5
	local T reserved
	T=$(find "$W/$name" -name '*.sptrace' | head -1)
	reserved=$(sed -n 's/.*max_memory_reserved=\([0-9]*\).*/\1/p' "$name.log" | tail -1)
	[ -n "$T" ] && [ -n "$reserved" ] || { fail "$name: no trace ($T) or no max_memory_reserved line"; return; }
	"$B/stepprof" report --by line --wide "$T" >"$name.lines.txt" 2>&1
	"$B/stepprof" report --by line --json "$T" >"$name.lines.json" 2>&1
	"$B/stepprof" memory --json "$T" -o "$name.memory.html" >"$name.memory.json" 2>/dev/null
	"$B/stepprof" memory "$T" -o "$name.memory.html" >"$name.memory.txt" 2>&1
	sed -n '/^The program.s own code\|^GPU kernel time by/,/^Total/p' "$name.lines.txt" | head -20
	"$PY" check.py "$name" "$name.lines.json" "$name.memory.json" "$reserved" $auto &&
		pass "$name: under 5% of kernel time without a line, [backward] rows, caching allocator beside max_memory_reserved" ||
		fail "$name: (above)"
	[ -n "${OUT:-}" ] && cp "$T" "$OUT/$name.sptrace" && cp "$name".lines.* "$name".memory.txt "$name.log" "$OUT/" 2>/dev/null
}

run gradscaler 14 6 6
if "$PY" -c 'import transformers' >/dev/null 2>&1; then
	run trainer 24 12 8 auto
else
	echo "SKIP trainer: transformers does not import"
fi
echo "trust_lines: $fails failed"
[ "$fails" -eq 0 ]
