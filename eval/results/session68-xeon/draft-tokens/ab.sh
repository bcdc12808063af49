#!/bin/bash
# Qwen pair, sampled (T=0.7, seed 0): draft-model drafting argmax vs sampled drafts, alternating.
cd /work/main
BIN=/tmp/ds68c
T=${T:-0.7}
for round in 1 2; do
  for mode in argmax sample; do
    echo "== round $round mode $mode T=$T start $(date -u +%H:%M:%S)"
    $BIN eval --model qwen2.5-coder-1.5b --methods ar,draft-model \
      --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
      --limit 20 --max-new-tokens 128 --turn-tokens 16 --temperature $T --seed 0 \
      --draft-tokens $mode --out /tmp/s68/ab/T$T-r$round-$mode > /tmp/s68/ab/T$T-r$round-$mode.log 2>&1
    grep -E "^\| (ar|draft-model) " /tmp/s68/ab/T$T-r$round-$mode/report.md | cut -d'|' -f2,5,6,11,12,14,15,16
  done
done
echo "done $(date -u +%H:%M:%S)"
