set -x
cd /work/main
BIN=/tmp/ds-head
OUT=eval/runs/zen3-tokenswift-20261203-214822
lscpu | grep "Model name"; date -u
for r in 1 2 3; do
$BIN eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo     --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template     --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "$OUT/tokenswift-greedy-$r"; date -u
done
for s in 0 1 2; do
$BIN eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo     --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template     --ignore-eos --max-new-tokens 4096 --turn-tokens 256     --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed $s     --out "$OUT/tokenswift-sampled-seed$s"; date -u
done
