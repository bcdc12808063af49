#!/usr/bin/env bash
# Session 57: TokenSwift greedy (1536-token prefix -> 4096 tokens, `ar` taking turns every 256)
# with the wide AVX-512 tiles (`ds-w12`, e64f9c2) against the binary before (`ds-head`),
# alternating, three rounds.
set -euo pipefail
OUT=${OUT:-eval/runs/s57ts}
for round in 1 2 3; do
    for bin in w12 head; do
        /tmp/s57/ds-$bin eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
            --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
            --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out $OUT/r$round/$bin-tokenswift-greedy
    done
done
