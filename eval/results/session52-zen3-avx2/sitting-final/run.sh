set -x
cd /work/main
OUT=eval/runs/zen3-sitting52b-20261203-231054
mkdir -p $OUT; date -u
/tmp/ds-52b bench ar --prompts 1 --max-new-tokens 16 --contexts 64 --curve-sizes 1,2,4,8,12,16,64 --curve-runs 30 --json > $OUT/bench-ar-smollm2.json; date -u
for b in ds-52b ds-head; do
/tmp/$b eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo     --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template     --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "$OUT/tokenswift-greedy-$b"; date -u
done
/tmp/ds-52b eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut     --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval     --limit 20 --max-new-tokens 128 --turn-tokens 16 --out $OUT/qwen-pair; date -u
cd /work/main
while pgrep -f sit2.sh > /dev/null; do sleep 5; done
for r in 2 3; do
/tmp/ds-52b eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo     --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template     --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "eval/runs/zen3-sitting52b-20261203-231054/tokenswift-greedy-ds-52b-$r"; date -u
done
