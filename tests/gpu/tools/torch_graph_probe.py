#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_graph_probe.py --shim libcuptishim.so --spec SPEC --mode graph|train|compile
[--when under|pre] [--fin sync|race] [--after same|reinst|recapture] - the torch variant of
graph_fin_probe.cu: torch's own CUDA graphs made while CUPTI is in the state SPEC names
(cupti_probe.h: A, C, T; C=off: no CUPTI at all, the reference), then CUPTI detached (kinds off,
flush, unsubscribe, cuptiFinalize on a thread of the shim's), then the graphs replayed again.
  graph    torch.cuda.graph capture of an MLP's inference (Linear, GELU, Linear, LayerNorm)
  train    torch.cuda.graph capture of a whole training step (forward, backward, capturable Adam),
           as tests/gpu/corpus/graphs_train.py
  compile  torch.compile(mode="reduce-overhead") inference (cudagraph trees)
--when pre: the graph is captured before the attach. --fin race: the program keeps replaying
while the shim's thread detaches. --after reinst: a graph made with keep_graph=True is
instantiated again after the detach (torch's CUDAGraph.instantiate); recapture: a new graph is
captured after the detach and replayed. 50 replays under CUPTI (A=win: a window of KM kinds over
replays 10-19; --win A-B moves it, B = 50 ending it just before the detach), 50 after.
--capkinds: KM kinds on while the graph is captured and instantiated, off again before the replays.
--kmoff N: with A=KM, the kinds go off (synchronised) before replay N, still attached. Prints one line "TORCHCELL <args>: OK checksum=X" (X: the outputs' sum,
or the trained weights' sum: equal to the C=off run's when the replays were right) or
"TORCHCELL <args>: FAIL <where>: <exception>"; exit 0 or 1."""
import argparse
import ctypes
import sys
import traceback

import torch
import torch.nn.functional as F
from torch import nn


def load_shim(path):
    shim = ctypes.CDLL(path)
    shim.shim_attach.argtypes = [ctypes.c_char_p]
    shim.shim_note.restype = ctypes.c_char_p
    shim.shim_records.restype = ctypes.c_ulonglong
    shim.shim_callbacks.restype = ctypes.c_ulonglong
    return shim


def mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.LayerNorm(1024)).cuda()


class Work:
    """One workload: make() captures (or compiles) it, run() replays it once, result() sums it."""

    def __init__(self, mode, keep):
        torch.manual_seed(0)
        self.mode, self.keep = mode, keep
        self.model = mlp()
        self.x = torch.randn(256, 1024, device="cuda")
        self.y = torch.randn(256, 1024, device="cuda")
        self.graph, self.out = None, None
        if mode == "train":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, capturable=True)
        else:
            self.model.eval()
        if mode == "compile":
            self.f = torch.compile(self.model, mode="reduce-overhead")

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def make(self):
        if self.mode == "compile":
            with torch.no_grad():
                for _ in range(4):  # warm-up, recording, replay
                    self.out = self.f(self.x)
            return
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as torch's docs ask
            for _ in range(3):
                if self.mode == "train":
                    self.step()
                else:
                    with torch.no_grad():
                        self.model(self.x)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = None
        if self.keep:
            try:
                self.graph = torch.cuda.CUDAGraph(keep_graph=True)
            except TypeError as e:  # a torch without keep_graph: no re-instantiation to try
                print(f"API-FALLBACK CUDAGraph(keep_graph=True): {e}", flush=True)
                self.keep = False
        self.graph = self.graph or torch.cuda.CUDAGraph()
        if self.mode == "train":
            self.opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.graph):
                self.out = self.step()
        else:
            with torch.no_grad(), torch.cuda.graph(self.graph):
                self.out = self.model(self.x)
        if self.keep:
            self.graph.instantiate()

    def run(self):
        if self.mode == "compile":
            with torch.no_grad():
                self.out = self.f(self.x)
        else:
            self.graph.replay()

    def result(self):
        torch.cuda.synchronize()
        if self.mode == "train":
            return float(sum(p.double().sum() for p in self.model.parameters()))
        return float(self.out.double().sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--mode", default="graph", choices=["graph", "train", "compile"])
    ap.add_argument("--when", default="under", choices=["under", "pre"])
    ap.add_argument("--fin", default="sync", choices=["sync", "race"])
    ap.add_argument("--after", default="same", choices=["same", "reinst", "recapture"])
    ap.add_argument("--win", default="10-20")
    ap.add_argument("--capkinds", action="store_true")
    ap.add_argument("--kmoff", type=int, default=-1)
    a = ap.parse_args()
    w0, w1 = (int(x) for x in a.win.split("-"))
    extra = (f",win={a.win}" if a.win != "10-20" else "") + (",capkinds" if a.capkinds else "") + \
        (f",kmoff={a.kmoff}" if a.kmoff >= 0 else "")
    tag = f"mode={a.mode},{a.spec}{extra},when={a.when},fin={a.fin},after={a.after}"
    shim = load_shim(a.shim)
    where = "setup"
    try:
        keep = a.after == "reinst" and a.mode != "compile"
        w = Work(a.mode, keep)
        if a.when == "pre":
            where = "capture before the attach"
            w.make()
        where = "attach"
        if "C=off" not in a.spec and shim.shim_attach(a.spec.encode()) != 0:
            print(f"TORCHCELL {tag}: SETUP the shim's attach failed (stderr)", flush=True)
            return 2
        if a.when == "under":
            where = "capture under CUPTI"
            if a.capkinds:
                shim.shim_window(1)
            w.make()
            if a.capkinds:
                torch.cuda.synchronize()
                shim.shim_window(0)
        where = "replays under CUPTI"
        for i in range(50):
            if i == w0 and "A=win" in a.spec:
                shim.shim_window(1)
            if (i == w1 and "A=win" in a.spec) or i == a.kmoff:
                torch.cuda.synchronize()
                shim.shim_window(0)
            w.run()
        if w1 >= 50 and "A=win" in a.spec:
            torch.cuda.synchronize()
            shim.shim_window(0)
        where = "the detach"
        if a.fin == "sync":
            torch.cuda.synchronize()
        shim.shim_fin_start()
        raced = 0
        while a.fin == "race" and shim.shim_fin_busy() and raced < 5000:
            w.run()
            raced += 1
        fin = shim.shim_fin_join()
        where = f"after the detach ({a.after})"
        if a.after == "reinst" and not w.keep:
            where += " unavailable: replayed the same graph"
        elif a.after == "reinst" and w.graph is not None:
            torch.cuda.synchronize()
            w.graph.instantiate()
        elif a.after == "recapture" and a.mode != "compile":
            w.make()
        for _ in range(50):
            w.run()
        done_after = where
        where = "the result"
        r = w.result()
        where = done_after
        print(f"TORCHCELL {tag}: OK checksum={r:.6e} ({where}) cuptiFinalize {fin}, replays during the detach {raced}, "
              f"records {shim.shim_records()}, callbacks {shim.shim_callbacks()}"
              f"{';' + shim.shim_note().decode() if shim.shim_note() else ''}", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 (what failed is the result)
        print(f"TORCHCELL {tag}: FAIL {where}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
              flush=True)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
