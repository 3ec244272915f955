#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""llmc_synth.py - a random-weight GPT-2 checkpoint and random token files in karpathy/llm.c's
formats, for benchmarking train_gpt2.cu where nothing can be downloaded. Standard library only.

Checkpoint (llm.c train_gpt2.cu gpt2_build_from_checkpoint, train_gpt2.py write_model): 256 int32
header [magic 20240326, version (3 = fp32, 5 = bf16), max_seq_len, vocab_size, num_layers,
num_heads, channels, padded_vocab_size, 0...], then the 16 parameter tensors in order wte (Vp*C),
wpe (maxT*C), ln1w, ln1b (L*C), qkvw (L*3C*C), qkvb (L*3C), attprojw (L*C*C), attprojb, ln2w, ln2b
(L*C), fcw (L*4C*C), fcb (L*4C), fcprojw (L*C*4C), fcprojb (L*C), lnfw, lnfb (C). Weights are
uniform in +-[2^-7, 2^-6) with a random sign, layer-norm weights 1, biases 0.
Tokens (llmc/dataloader.h): 256 int32 header [magic 20240520, version 1, token count, 0...], then
uint16 tokens (here uniform in 0..32767, all below GPT-2's vocabulary of 50257).
The weights are random, so the loss stays near ln(50257); only the time per step matters.

usage: llmc_synth.py DIR [--layers 12 --channels 768 --heads 12] [--dtype fp32|bf16]
                         [--tokens 1048576] [--seed 1]
Writes DIR/gpt2_synth.bin (version 3 for fp32, built with -DENABLE_FP32; 5 for bf16, the
default build), DIR/synth_train.bin and DIR/synth_val.bin."""
import argparse
import os
import random
import struct
import sys

CHUNK = 1 << 22               # values per write
MAX_SEQ, VOCAB, VOCAB_PAD = 1024, 50257, 50304


def header(*vals):
    h = list(vals) + [0] * (256 - len(vals))
    return struct.pack("<256i", *h)


def tensor_sizes(L, C, maxT=MAX_SEQ, Vp=VOCAB_PAD):
    """(name, values, kind) in llm.c's order; kind: w (random), one (1.0), zero."""
    return [("wte", Vp * C, "w"), ("wpe", maxT * C, "w"), ("ln1w", L * C, "one"), ("ln1b", L * C, "zero"),
            ("qkvw", L * 3 * C * C, "w"), ("qkvb", L * 3 * C, "zero"), ("attprojw", L * C * C, "w"),
            ("attprojb", L * C, "zero"), ("ln2w", L * C, "one"), ("ln2b", L * C, "zero"),
            ("fcw", L * 4 * C * C, "w"), ("fcb", L * 4 * C, "zero"), ("fcprojw", L * C * 4 * C, "w"),
            ("fcprojb", L * C, "zero"), ("lnfw", C, "one"), ("lnfb", C, "zero")]


def masked(rng, n, width, keep, setbits):
    """n little-endian values of `width` bytes: random bytes, ANDed with keep and ORed with setbits
    (both `width`-byte patterns), computed on one big integer per chunk (C speed, no numpy)."""
    raw = int.from_bytes(rng.randbytes(n * width), "little")
    k = int.from_bytes(keep * n, "little")
    s = int.from_bytes(setbits * n, "little")
    return ((raw & k) | s).to_bytes(n * width, "little")


def write_values(f, rng, n, kind, dtype):
    # fp32 bit pattern of +-[2^-7, 2^-6): sign and mantissa random, biased exponent 120
    # (little-endian bytes: mantissa low, mantissa mid, exp bit 0 + mantissa high, sign + exp bits 1-7)
    w = 4 if dtype == "fp32" else 2
    one = struct.pack("<f", 1.0)
    while n > 0:
        k = min(n, CHUNK)
        if kind == "zero":
            b = bytes(k * w)
        elif kind == "one":
            b = (one if w == 4 else one[2:]) * k
        elif w == 4:
            b = masked(rng, k, 4, b"\xff\xff\x7f\x80", b"\x00\x00\x00\x3c")
        else:  # bf16: the upper half of the fp32 pattern
            b = masked(rng, k, 2, b"\x7f\x80", b"\x00\x3c")
        f.write(b)
        n -= k


def write_checkpoint(path, L, C, heads, dtype, rng):
    with open(path, "wb") as f:
        f.write(header(20240326, 3 if dtype == "fp32" else 5, MAX_SEQ, VOCAB, L, heads, C, VOCAB_PAD))
        for _, n, kind in tensor_sizes(L, C):
            write_values(f, rng, n, kind, dtype)


def write_tokens(path, n, rng):
    with open(path, "wb") as f:
        f.write(header(20240520, 1, n))
        left = n
        while left > 0:
            k = min(left, CHUNK)
            f.write(masked(rng, k, 2, b"\xff\x7f", b"\x00\x00"))
            left -= k


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--channels", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--tokens", type=int, default=1 << 20)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.channels % a.heads or a.layers < 1 or a.tokens < 1025:
        sys.exit("llmc_synth: channels must divide by heads, layers >= 1, tokens > 1024")
    os.makedirs(a.dir, exist_ok=True)
    rng = random.Random(a.seed)
    ck = os.path.join(a.dir, "gpt2_synth.bin")
    write_checkpoint(ck, a.layers, a.channels, a.heads, a.dtype, rng)
    for name, n in (("synth_train.bin", a.tokens), ("synth_val.bin", max(a.tokens // 8, 1 << 16))):
        write_tokens(os.path.join(a.dir, name), n, rng)
    params = sum(n for _, n, _ in tensor_sizes(a.layers, a.channels))
    print(f"llmc_synth: {ck} ({a.dtype}, {params} parameters, {os.path.getsize(ck)} bytes), "
          f"{a.tokens} training tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
