#!/usr/bin/env bash
# Session 56: TokenSwift (heads `just train-tokenswift`'s recipe trained on this Xeon, by
# `ds-head train tokenswift --model smollm2-135m --out checkpoints/tokenswift-demo`) against
# `ar`, greedy and sampled, as scripts/every_method.sh runs them; then MT-Bench sampled.
set -euo pipefail
B=/tmp/s56/ds-head
OUT=${OUT:-eval/runs/s56ts}
$B eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out $OUT/tokenswift-greedy
$B eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 \
    --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed 0 \
    --out $OUT/tokenswift-sampled
$B eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
    --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
    --temperature 0.7 --seed 0 --turn-tokens 32 --out $OUT/mtbench80-sampled
