#!/usr/bin/env bash
# Alternating Qwen pair evals: base vs cal.
set -euo pipefail
OUT=/tmp/qwen-ab
mkdir -p $OUT
for r in 1 2; do
  for b in base cal; do
    start=$(date +%s)
    /tmp/ds-$b eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
      --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
      --limit 20 --max-new-tokens 128 --turn-tokens 16 --out $OUT/$b-r$r > $OUT/$b-r$r.log 2>&1
    echo "$b r$r $(( $(date +%s) - start )) s" >> $OUT/times.txt
  done
done
