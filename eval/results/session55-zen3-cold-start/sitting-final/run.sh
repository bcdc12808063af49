set -x
cd /work/main
OUT=eval/runs/zen3-sitting55b-$(date -u +%Y%m%d-%H%M%S)
mkdir -p $OUT; date -u
/tmp/ds-55b eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval --limit 20 --max-new-tokens 128 --turn-tokens 16 --out $OUT/qwen-pair; date -u
/tmp/ds-55b eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl --max-new-tokens 128 --turn-tokens 32 --out $OUT/context60; date -u
