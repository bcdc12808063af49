#!/usr/bin/env bash
# Session 69: ReDrafter (told its depth, the copied continuation beside its beams) on all 80
# MT-Bench × 256, greedy and sampled (T = 0.7), the binary before (`old`, 1b1a23d) and after the
# stale-level fade (`new`, 86cd333) alternating, two rounds each.
set -u
OUT=${OUT:-eval/results/session69-xeon/stale-levels}
for mode in greedy sampled; do
  extra=""; [ $mode = sampled ] && extra="--temperature 0.7 --seed 0"
  for round in 1 2; do
    for bin in new old; do
      [ $round = 2 ] && bin=$([ $bin = new ] && echo old || echo new)
      /tmp/s69/ds-$bin eval --methods ar,redrafter --drafter checkpoints/redrafter-demo \
        --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 $extra \
        --out "$OUT/redrafter-$mode$round-$bin" > /dev/null 2>&1
      echo "$mode round $round $bin $(date -u +%H:%M) $(grep -E '^\| (ar|redrafter) \|' "$OUT/redrafter-$mode$round-$bin/report.md" | head -2 | awk -F'|' '{printf "%s τ %s %s %s; ", $2, $5, $11, $13}')"
    done
  done
done
