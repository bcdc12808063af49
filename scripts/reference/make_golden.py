#!/usr/bin/env python3
"""Golden logits for a GGUF model, computed by the numpy reference (numpy_llama.py).

Makes, in --out:
    golden.json     model file name + sha256, script, dtype, tokenizer rules and,
                    per prompt: text, token ids, top-5 ids/logits, top-2 margin,
                    logits summary stats, and a greedy continuation of N tokens
                    (ids, top-2 margin at each step, decoded text).
    logits.f32      final-position logits of every prompt, little-endian
                    float32, prompts in golden.json order, vocab_size values
                    each (``--logits-dtype f16`` writes logits.f16 instead).
    tokenizer.json  the `tokenizers` tokenizer built from the GGUF's embedded
                    vocab (see gguf_tokenizer.py for the rules), for comparison
                    (not with --no-tokenizer-json).

The forward pass runs in float64 on weights dequantised with gguf-py; logits
are stored rounded to float32.  Tokenisation: the GGUF's own vocab/merges with
llama.cpp's pre-tokeniser for ``tokenizer.ggml.pre`` (smollm / qwen2),
special tokens matched whole, BOS only if ``add_bos_token``.

The prompt set is picked from the architecture: ``llama`` -> SMOLLM_PROMPTS,
``qwen2`` -> QWEN_PROMPTS (override with --prompt-set).

Regenerate (from the repository root; needs ``pip install gguf numpy tokenizers``):

    python3 scripts/reference/make_golden.py \\
        --model $HOME/.cache/draftsmith/models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --out tests/golden/smollm2-135m

    python3 scripts/reference/make_golden.py \\
        --model $HOME/.cache/draftsmith/models/qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct.gguf \\
        --out tests/golden/qwen2.5-coder-0.5b --no-tokenizer-json

(a few minutes each on a 2-core machine.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_tokenizer import build_tokenizer  # noqa: E402
from numpy_llama import GGUFModel, topk  # noqa: E402

LONG_PARAGRAPH = (
    "Speculative decoding is a technique for accelerating inference in large language models "
    "without changing their output distribution. A small, fast draft model proposes several tokens "
    "ahead, and the large target model then verifies all of those proposals in a single forward pass. "
    "Whenever the target model agrees with a drafted token, that token is accepted for free; at the "
    "first disagreement the target model's own choice is used instead, and drafting resumes from there. "
    "Because verifying many tokens costs roughly the same as generating one, the overall speed-up "
    "depends mainly on how often the draft model guesses correctly. Good draft models are therefore "
    "trained to imitate the target closely, often by distillation on text that the target itself "
    "produced. In practice, speed-ups of two to three times are common for code and other predictable "
    "text, while creative writing tends to benefit less, since even a strong draft model cannot "
    "anticipate every surprising turn of phrase. The remaining question is how to choose the number of"
)

SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(system, user):
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


SMOLLM_PROMPTS = [
    ("chatml_capital", chatml(SMOLLM_SYSTEM, "What is the capital of France?")),
    ("plain_english", "The quick brown fox jumps over the lazy dog. Meanwhile, in a small village by the sea,"),
    ("single_token", "Hello"),
    ("code_python", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'),
    ("code_rust", "fn main() {\n    let v: Vec<u32> = (1..=10).collect();\n    println!(\"{}\", v.iter().sum::<u32>());\n}\n\n// The sum printed above is"),
    ("numbers", "In 1969, 3 astronauts travelled 384,400 km to the Moon. By 2024, 12 people had walked on it, and the count of 7 + 5 ="),
    ("non_ascii", "Café naïve — 日本語"),
    ("qa_punctuation", "Q: What's 2+2?\nA: It's 4.\n\nQ: Who wrote \"Hamlet\"?\nA:"),
    ("json", '{"name": "draftsmith", "version": "0.1.0", "features": ["speculative", "decoding"], "count": 42,'),
    ("chatml_code", chatml(SMOLLM_SYSTEM, "Write a Python function that reverses a string.")),
    ("long_paragraph", LONG_PARAGRAPH),
]

QWEN_PROMPTS = [
    ("chatml_capital", chatml(QWEN_SYSTEM, "What is the capital of France?")),
    ("chatml_code", chatml(QWEN_SYSTEM, "Write a Python function that checks whether a number is prime.")),
    ("code_python", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'),
    ("fim", "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n    return result\n<|fim_middle|>"),
    ("code_rust", "fn main() {\n    let v: Vec<u32> = (1..=10).collect();\n    println!(\"{}\", v.iter().sum::<u32>());\n}\n\n// The sum printed above is"),
    ("numbers", "In 1969, 3 astronauts travelled 384,400 km to the Moon. By 2024, 12 people had walked on it, and the count of 7 + 5 ="),
    ("non_ascii", "Café naïve — 日本語"),
    ("long_paragraph", LONG_PARAGRAPH),
]

PROMPT_SETS = {"smollm": SMOLLM_PROMPTS, "qwen": QWEN_PROMPTS}

TOKENIZER_RULES = {
    "smollm": "byte-level BPE (GPT-2 byte->unicode), merges by rank; pre-tokenizer = llama.cpp "
              "LLAMA_VOCAB_PRE_TYPE_SMOLLM: each \\p{N} char split off, then the GPT-2 regex "
              "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S); "
              "CONTROL tokens matched whole in the text; no BOS (add_bos_token=false); no normalizer",
    "qwen2": "byte-level BPE (GPT-2 byte->unicode), merges by rank; pre-tokenizer = llama.cpp "
             "LLAMA_VOCAB_PRE_TYPE_QWEN2 regex (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
             "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+; CONTROL and "
             "USER_DEFINED tokens matched whole; no BOS (add_bos_token=false); no NFC normalizer "
             "(prompts are already NFC)",
}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description="golden logits from the numpy reference")
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--prompt-set", choices=sorted(PROMPT_SETS), default=None)
    ap.add_argument("--greedy", type=int, default=8, help="greedy continuation length")
    ap.add_argument("--logits-dtype", choices=["f32", "f16"], default="f32")
    ap.add_argument("--tokenizer-json", action=argparse.BooleanOptionalAction, default=True,
                    help="also write tokenizer.json (5 MB for Qwen's 152k vocab: skipped there)")
    args = ap.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    tok, tok_info = build_tokenizer(args.model)
    model = GGUFModel(args.model)
    print(f"loaded {args.model} ({model.arch}, {model.n_layer} layers, vocab {model.vocab_size}) "
          f"in {time.time() - t0:.1f}s", flush=True)
    assert tok_info["vocab_size"] == model.vocab_size, (tok_info["vocab_size"], model.vocab_size)
    prompt_set = args.prompt_set or ("qwen" if model.arch == "qwen2" else "smollm")
    prompts = PROMPT_SETS[prompt_set]

    if args.tokenizer_json:
        tok.save(os.path.join(args.out, "tokenizer.json"), pretty=False)

    np_dtype = "<f4" if args.logits_dtype == "f32" else "<f2"
    logits_name = f"logits.{args.logits_dtype}"
    records = []
    all_logits = []
    for idx, (name, text) in enumerate(prompts):
        t1 = time.time()
        ids = tok.encode(text, add_special_tokens=True).ids
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == text, f"tokenizer round trip failed for {name}: {back!r}"
        logits = model.forward(ids, last_only=True)[0]
        top_ids, top_vals = topk(logits, 5)
        g_ids, g_margins = model.greedy(ids, args.greedy)  # KV-cached
        assert g_ids[0] == top_ids[0]
        # cross-check the cached greedy steps against one full (uncached) forward
        full = model.forward(ids + g_ids[:-1])[len(ids) - 1:]
        for step, row in enumerate(full):
            i2, v2 = topk(row, 2)
            assert i2[0] == g_ids[step] and abs((v2[0] - v2[1]) - g_margins[step]) < 1e-8, (name, step)
        del full
        rec = {
            "name": name,
            "text": text,
            "ids": ids,
            "n_tokens": len(ids),
            "logits_index": idx,
            "top5_ids": top_ids,
            "top5_logits": top_vals,
            "top2_margin": top_vals[0] - top_vals[1],
            "logits_stats": {
                "mean": float(logits.mean()),
                "std": float(logits.std()),
                "min": float(logits.min()),
                "max": float(logits.max()),
            },
            "greedy_ids": g_ids,
            "greedy_margins": g_margins,
            "greedy_text": tok.decode(g_ids, skip_special_tokens=False),
        }
        records.append(rec)
        all_logits.append(logits.astype(np_dtype))
        print(f"[{idx}] {name}: {len(ids)} tokens, top1 {top_ids[0]} margin {rec['top2_margin']:.4f}, "
              f"greedy {rec['greedy_text']!r} ({time.time() - t1:.1f}s)", flush=True)

    np.stack(all_logits).astype(np_dtype).tofile(os.path.join(args.out, logits_name))

    golden = {
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256_of(args.model),
        "model_size_bytes": os.path.getsize(args.model),
        "model_general_name": model.meta.get("general.name"),
        "arch": model.arch,
        "hparams": {
            "n_layer": model.n_layer, "n_embd": model.n_embd, "n_ff": model.n_ff,
            "n_head": model.n_head, "n_head_kv": model.n_head_kv, "head_dim": model.head_dim,
            "n_rot": model.n_rot, "rms_eps": model.eps, "rope_freq_base": model.rope_base,
            "rope_type": "neox (split halves)" if model.rope_neox else "normal (adjacent pairs, permuted q/k)",
            "context_length": model.n_ctx_train, "vocab_size": model.vocab_size,
            "tied_embeddings": model.tied_embeddings,
        },
        "script": "scripts/reference/make_golden.py",
        "reference": "scripts/reference/numpy_llama.py",
        "compute_dtype": "float64",
        "weights": "GGUF tensors dequantised exactly with gguf.quants.dequantize (no activation quantisation)",
        "logits_file": logits_name,
        "logits_dtype": "float32 little-endian" if args.logits_dtype == "f32" else "float16 little-endian",
        "logits_layout": "[n_prompts][vocab_size], final position of each prompt, prompts in order",
        "greedy_steps": args.greedy,
        "greedy_note": "greedy_margins[i] = top1-top2 logit of the step that chose greedy_ids[i]; "
                       "greedy_margins[0] == top2_margin",
        "tokenizer": {
            "source": "GGUF tokenizer.ggml.* via scripts/reference/gguf_tokenizer.py"
                      + (" (also tokenizer.json here)" if args.tokenizer_json else ""),
            "pre": tok_info["pre"],
            "add_bos_token": tok_info["add_bos_token"],
            "bos_token_id": tok_info["bos_token_id"],
            "eos_token_id": tok_info["eos_token_id"],
            "rules": TOKENIZER_RULES.get(tok_info["pre"], ""),
        },
        "prompts": records,
    }
    with open(os.path.join(args.out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out} in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
