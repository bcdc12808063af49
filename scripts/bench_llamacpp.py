#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python) greedy decoding, driven prompt by prompt by `draftsmith bench ar
--vs-llamacpp`, so the two engines alternate on the same GGUF and the same prompt token ids and
machine load hits both alike.

Usage: python3 scripts/bench_llamacpp.py --model M.gguf [--threads 2]
First stdout line: {"engine", "threads", "system_info"} (the build's SIMD flags). Then, for each
stdin line {"ids": [...], "n": N}, one stdout line {"prefill_s", "decode_s", "decoded"}: N new
tokens (the first from the prefill's logits, as in draftsmith), EOS ignored. Ends at EOF.
Install: `just install-llamacpp` (scripts/install_llamacpp.sh; compiles llama.cpp).
"""
import argparse
import json
import os
import sys
import time

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_threads=args.threads, n_batch=512, verbose=False, logits_all=False)

    def run(ids, n):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        tok = int(llm.scores[llm.n_tokens - 1].argmax())
        for _ in range(n - 1):
            llm.eval([tok])
            tok = int(llm.scores[llm.n_tokens - 1].argmax())
        return t1 - t0, time.perf_counter() - t1

    info = llama_cpp.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else str(info)
    print(json.dumps({"engine": f"llama-cpp-python {llama_cpp.__version__}", "threads": args.threads, "system_info": info.strip()}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        prefill, decode = run(req["ids"], req["n"])
        print(json.dumps({"prefill_s": prefill, "decode_s": decode, "decoded": req["n"] - 1}), flush=True)


if __name__ == "__main__":
    main()
