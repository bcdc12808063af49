#!/usr/bin/env bash
# Session 56 A/B: `ds-tile` (the cost model's tile edges, this session's change) against
# `ds-head` (main at 6cc6a0b), alternating, two rounds; every eval has `ar` side by side.
set -euo pipefail
OUT=${OUT:-eval/runs/s56ab}
for round in 1 2; do
    for bin in tile head; do
        B=/tmp/s56/ds-$bin
        $B eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
            --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
            --turn-tokens 32 --out $OUT/r$round/$bin-mtbench80
        $B eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
            --max-new-tokens 128 --turn-tokens 32 --out $OUT/r$round/$bin-context60
    done
done
