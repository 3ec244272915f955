#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""llmc_data.py DIR - synthetic token files for karpathy/llm.c's train_gpt2cu (fetched, not
committed): DIR/train.bin and DIR/val.bin in llm.c's data format (a header of 256 int32: magic
20240520, version 1, token count; then uint16 GPT-2 token ids), random tokens < 50257. The model
is initialised from a descriptor (-e d6), so no checkpoint download is needed."""
import os
import sys

import numpy as np

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(0)
for split, n in (("train", 4_000_000), ("val", 400_000)):
    hdr = np.zeros(256, dtype=np.int32)
    hdr[0], hdr[1], hdr[2] = 20240520, 1, n
    with open(os.path.join(d, f"{split}.bin"), "wb") as f:
        f.write(hdr.tobytes())
        f.write(rng.integers(0, 50257, n, dtype=np.uint16).tobytes())
print(f"llmc data in {d}")
