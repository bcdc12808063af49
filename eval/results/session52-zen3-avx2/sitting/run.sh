set -x
cd /work/main
OUT=eval/runs/zen3-sitting52-20261203-222755
mkdir -p $OUT
lscpu > $OUT/machine.txt; date -u
/tmp/ds-52 bench ar --prompts 1 --max-new-tokens 16 --contexts 64 --curve-sizes 1,2,3,4,5,6,8,16,64 --curve-runs 30 --json > $OUT/bench-ar-smollm2.json; date -u
/tmp/ds-52 eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60; date -u
/tmp/ds-head eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60-before; date -u
/tmp/ds-52 eval --methods ar,prompt-lookup,ngram-trie,token-cache --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 --out $OUT/mtbench80; date -u
