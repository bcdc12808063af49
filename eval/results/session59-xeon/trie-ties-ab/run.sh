#!/usr/bin/env bash
# Alternating A/B: base vs trie (ties to the latest occurrence), context60 (ar, PL, trie) and MT-Bench (ar, trie).
set -euo pipefail
cd /work/main
OUT=${OUT:-/tmp/trie-ab}
mkdir -p $OUT
for r in 1 2 3; do
  for b in base trie; do
    start=$(date +%s)
    /tmp/ds-$b eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
        --max-new-tokens 128 --turn-tokens 32 --out $OUT/r$r/$b-context60 > $OUT/r$r-$b-context.log 2>&1
    /tmp/ds-$b eval --methods ar,ngram-trie --prompts mt-bench --max-new-tokens 256 \
        --turn-tokens 32 --out $OUT/r$r/$b-mtbench80 > $OUT/r$r-$b-mtbench.log 2>&1
    echo "$b r$r $(( $(date +%s) - start )) s" >> $OUT/times.txt
  done
done
