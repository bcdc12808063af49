#!/usr/bin/env bash
# Every SmolLM2 method under sampling (T = 0.7, seed 0) on all 80 MT-Bench first turns × 256 tokens,
# `auto`, prompt by prompt (`ar` first): does speculation pay when the target samples? ReDrafter:
# the demo drafter (`just pipeline`'s). `BIN`: the binary; `OUT`: the eval directory.
set -euo pipefail
${BIN:-draftsmith} eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
    --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
    --temperature 0.7 --seed 0 --out "${OUT:?an eval directory}"
