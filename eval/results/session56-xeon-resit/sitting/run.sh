#!/usr/bin/env bash
# Session 56 sitting part 1 (the methods without a trained drafter), binary `ds-head` = main at
# 6cc6a0b, on the Xeon; `just pipeline` paused (SIGSTOP) for the duration so nothing else runs.
set -euo pipefail
B=/tmp/s56/ds-head
OUT=${OUT:-eval/runs/s56}
mkdir -p $OUT
{ date -u; grep -m1 "model name" /proc/cpuinfo; grep -m1 flags /proc/cpuinfo; nproc; } > $OUT/machine.txt
$B eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
    --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60
$B eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 20 --max-new-tokens 128 --turn-tokens 16 --out $OUT/qwen-pair
$B eval --methods ar,prompt-lookup,ngram-trie,token-cache --prompts mt-bench --max-new-tokens 256 \
    --turn-tokens 32 --out $OUT/mtbench80
