#!/usr/bin/env python3
"""Times llama.cpp (llama-cpp-python) greedy decoding on the same GGUF and prompt token ids as
`draftsmith bench ar --vs-llamacpp`, so the two are compared side by side in one run.

Usage: python3 scripts/bench_llamacpp.py --model M.gguf --prompts prompts.json [--threads 2]
prompts.json: {"prompts": [[ids…], …], "max_new_tokens": N}
Prints one JSON line: decode_tokens_per_s, prefill_tokens_per_s, ms_per_token.
Install: `just install-llamacpp` (compiles llama.cpp, ~13 min on 2 cores).
"""
import argparse
import json
import os
import time

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    spec = json.load(open(args.prompts))
    prompts, n_new = spec["prompts"], spec["max_new_tokens"]
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_threads=args.threads, n_batch=512, verbose=False, logits_all=False)

    def run(ids, n):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        tok = int(llm.scores[llm.n_tokens - 1].argmax())
        for _ in range(n - 1):  # the first new token comes from prefill, as in draftsmith
            llm.eval([tok])
            tok = int(llm.scores[llm.n_tokens - 1].argmax())
        return t1 - t0, time.perf_counter() - t1

    run(prompts[0], 8)  # warm-up
    prefill = decode = 0.0
    n_prompt = n_decoded = 0
    for ids in prompts:
        p, d = run(ids, n_new)
        prefill += p
        decode += d
        n_prompt += len(ids)
        n_decoded += n_new - 1
    print(json.dumps({
        "engine": f"llama-cpp-python {llama_cpp.__version__}",
        "threads": args.threads,
        "decode_tokens_per_s": n_decoded / decode,
        "ms_per_token": 1e3 * decode / n_decoded,
        "prefill_tokens_per_s": n_prompt / prefill,
    }))


if __name__ == "__main__":
    main()
