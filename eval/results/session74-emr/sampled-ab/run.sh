#!/bin/bash
# Sampled Qwen pair, base vs new alternating.
cd /work/main
for r in 1 2 3; do for b in base new; do
  out=/tmp/s74/ab/$b-$r; rm -rf $out
  /tmp/ds-$b eval --model qwen2.5-coder-1.5b --methods ar,draft-model \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 12 --max-new-tokens 128 --turn-tokens 16 --temperature 0.7 --seed 0 --out $out > $out.log 2>&1
  echo "$b $r $(date +%T)" >> /tmp/s74/ab/progress
done; done
