#!/usr/bin/env bash
# Session 69: the Qwen pair greedy (every_method.sh's command), the binary before (`old`,
# 1b1a23d) and after the stale-level fade (`new`, 86cd333) alternating, three rounds.
set -u
OUT=${OUT:-eval/results/session69-xeon/stale-levels}
for round in 1 2 3; do
  for bin in new old; do
    [ $round = 2 ] && bin=$([ $bin = new ] && echo old || echo new)
    /tmp/s69/ds-$bin eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
      --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
      --limit 20 --max-new-tokens 128 --turn-tokens 16 --out "$OUT/greedy$round-$bin" > /dev/null 2>&1
    echo "round $round $bin $(date -u +%H:%M) $(grep -E '^\| (ar|draft-model|post-use-precut) \|' "$OUT/greedy$round-$bin/report.md" | awk -F'|' '{printf "%s τ %s %s; ", $2, $5, $11}')"
  done
done
