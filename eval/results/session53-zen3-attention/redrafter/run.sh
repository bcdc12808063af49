set -x
cd /work/main
OUT=eval/runs/zen3-redrafter53-$(date -u +%Y%m%d-%H%M%S)
date -u
/tmp/ds-b1 eval --methods ar,prompt-lookup,redrafter --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 --turn-tokens 32 --out $OUT/mtbench80-redrafter; date -u
