set -x
cd /work/main
OUT=eval/runs/zen3-sitting53-$(date -u +%Y%m%d-%H%M%S)
mkdir -p $OUT
lscpu > $OUT/machine.txt; date -u
/tmp/ds-b1 bench ar --prompts 1 --max-new-tokens 16 --contexts 64,4096 --curve-sizes 1,2,4,8,10,16 --curve-runs 20 --json > $OUT/bench-ar-smollm2.json; date -u
/tmp/ds-b1 eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60; date -u
/tmp/ds-base eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60-before; date -u
/tmp/ds-b1 eval --methods ar,prompt-lookup,ngram-trie,token-cache --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 --out $OUT/mtbench80; date -u
