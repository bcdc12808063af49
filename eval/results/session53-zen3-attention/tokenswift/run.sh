set -x
cd /work/main
OUT=eval/runs/zen3-tokenswift-s53-$(date -u +%Y%m%d-%H%M%S)
lscpu | grep "Model name"; date -u
for r in 1 2 3; do
for b in base new; do
/tmp/ds-$b eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo     --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template     --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "$OUT/tokenswift-greedy-$b-$r"; date -u
done
done
