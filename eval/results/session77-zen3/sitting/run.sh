#!/usr/bin/env bash
# Session 77 sitting on the Zen 3: the methods that need no trained drafter, every eval with ar side by side.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=${BIN:-draftsmith}
OUT=${OUT:?an output directory}; mkdir -p "$OUT"
date -u +"start %FT%TZ" > $OUT/times.txt
$B bench ar --prompts 1 --max-new-tokens 16 --contexts 64 --curve-sizes 1,2,4,8,16,64 --curve-runs 30 --json > $OUT/bench-ar-smollm2.json 2> $OUT/bench-ar-smollm2.err
date -u +"curve done %FT%TZ" >> $OUT/times.txt
$B eval --methods ar,prompt-lookup,ngram-trie,token-cache --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 --out $OUT/mtbench80 > $OUT/mtbench80.log 2>&1
date -u +"mtbench done %FT%TZ" >> $OUT/times.txt
$B eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60 > $OUT/context60.log 2>&1
date -u +"context done %FT%TZ" >> $OUT/times.txt
$B eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval --limit 20 --max-new-tokens 128 --turn-tokens 16 --out $OUT/qwen-pair > $OUT/qwen-pair.log 2>&1
date -u +"qwen done %FT%TZ" >> $OUT/times.txt
