#!/usr/bin/env python3
"""Optional cross-check of a golden directory against llama.cpp itself.

Makes no files; prints a comparison.  For every prompt in golden.json it
tokenises the text with llama.cpp (add_bos per the GGUF, special tokens parsed)
and compares the ids with the golden ids, then evaluates the golden ids with
llama.cpp (CPU) and compares the final-position logits with logits.f32:
top-1 agreement, top-5 overlap, max |diff| and correlation.  llama.cpp
quantises activations to 8 bits for quantised mat-muls, so its logits differ
from the float64 reference by quantisation noise (typically ~0.1 - 0.5 here);
this check is about tokenisation and gross correctness, not bit equality.
With an all-F32 copy of the GGUF and ``--f32-kv`` the two agree to ~1e-3.

Needs ``pip install llama-cpp-python`` (builds llama.cpp from source: slow),
plus gguf/numpy.  Run from the repository root, e.g.:

    python3 scripts/reference/check_llamacpp.py \\
        --model $HOME/.cache/draftsmith/models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --golden tests/golden/smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description="compare golden logits with llama.cpp")
    ap.add_argument("--model", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--f32-kv", action="store_true",
                    help="F32 KV cache in llama.cpp (default F16) for a tighter comparison")
    args = ap.parse_args(argv)

    from llama_cpp import Llama

    g = json.load(open(os.path.join(args.golden, "golden.json"), encoding="utf-8"))
    dt = "<f4" if g["logits_file"].endswith("f32") else "<f2"
    V = g["hparams"]["vocab_size"]
    ref = np.fromfile(os.path.join(args.golden, g["logits_file"]), dtype=dt).reshape(-1, V).astype(np.float64)
    n_ctx = max(p["n_tokens"] for p in g["prompts"]) + 16
    llm = Llama(model_path=args.model, n_ctx=n_ctx, n_batch=n_ctx, n_threads=os.cpu_count(),
                logits_all=True, verbose=False,
                **({"type_k": 0, "type_v": 0} if args.f32_kv else {}))  # 0 = GGML_TYPE_F32
    add_bos = g["tokenizer"]["add_bos_token"]
    ok_tok = ok_top1 = 0
    for p in g["prompts"]:
        ids_cpp = llm.tokenize(p["text"].encode("utf-8"), add_bos=add_bos, special=True)
        same = list(ids_cpp) == p["ids"]
        ok_tok += same
        llm.reset()
        llm.eval(p["ids"])
        cpp = np.array(llm.scores[len(p["ids"]) - 1], dtype=np.float64)
        r = ref[p["logits_index"]]
        top_cpp = list(np.argsort(-cpp, kind="stable")[:5])
        top1_same = int(top_cpp[0]) == p["top5_ids"][0]
        ok_top1 += top1_same
        overlap = len(set(int(t) for t in top_cpp) & set(p["top5_ids"]))
        diff = np.abs(cpp - r)
        corr = float(np.corrcoef(cpp, r)[0, 1])
        print(f"{p['name']:16s} tokens {'OK ' if same else 'DIFF'} top1 {'OK ' if top1_same else 'DIFF'} "
              f"top5-overlap {overlap}/5 max|d| {diff.max():.2e} mean|d| {diff.mean():.2e} corr {corr:.6f} "
              f"margin {p['top2_margin']:.3f}")
        if not same:
            print("   golden  :", p["ids"])
            print("   llama.cpp:", list(ids_cpp))
    n = len(g["prompts"])
    print(f"tokenisation identical for {ok_tok}/{n} prompts; top-1 identical for {ok_top1}/{n}")


if __name__ == "__main__":
    sys.exit(main())
