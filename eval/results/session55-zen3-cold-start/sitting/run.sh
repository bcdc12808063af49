set -x
cd /work/main
OUT=eval/runs/zen3-sitting55-$(date -u +%Y%m%d-%H%M%S)
mkdir -p $OUT
lscpu > $OUT/machine.txt; date -u
/tmp/ds-55 eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60; date -u
/tmp/ds-head eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60-before; date -u
/tmp/ds-55 eval --methods ar,prompt-lookup,ngram-trie,token-cache --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 --out $OUT/mtbench80; date -u
