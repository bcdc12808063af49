#!/usr/bin/env bash
# Sampled MT-Bench, ReDrafter (auto policy, beam width 1, copy beside it): argmax vs drawn chains, alternating.
set -u
cd "$(git rev-parse --show-toplevel)"
# A binary built with ../redrafter-drawn-chain.patch applied (session 75's `ds-new`).
BIN=${BIN:-target/release/draftsmith}
mkdir -p ${OUT:-/tmp/redrafter-drawn}
for round in 1 2 3; do
  for mode in argmax sample; do
    $BIN eval --methods ar,redrafter --drafter checkpoints/redrafter-demo --prompts mt-bench --limit 40 \
      --max-new-tokens 256 --temperature 0.7 --seed $round --turn-tokens 32 --draft-tokens $mode \
      --out ${OUT:-/tmp/redrafter-drawn}/t0.7-$mode-$round > ${OUT:-/tmp/redrafter-drawn}/t0.7-$mode-$round.log 2>&1
    echo "$mode $round rc=$?"
  done
done
