#!/usr/bin/env bash
# Session 57 A/B: `ds-w12` (AVX-512 tiles of up to 12 rows, e64f9c2) against `ds-head` (main at
# 9a8b3bf, tiles of 8), alternating, two rounds; every eval has `ar` side by side.
set -euo pipefail
OUT=${OUT:-eval/runs/s57ab}
for round in 1 2; do
    for bin in w12 head; do
        B=/tmp/s57/ds-$bin
        $B eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
            --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
            --turn-tokens 32 --out $OUT/r$round/$bin-mtbench80
        $B eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
            --max-new-tokens 128 --turn-tokens 32 --out $OUT/r$round/$bin-context60
    done
done
