#!/bin/bash
# Device run (session 17): SmolLM2 on CUDA: TokenSwift greedy from a 1536-token held-out prefix
# (ar, tokenswift auto, tokenswift fixed), then a small real-model pipeline (distill -> train
# ReDrafter -> eval ar,redrafter). DEV=cpu and N=<tokens> for a dry run.
set -u
cd "$(dirname "$0")/.."
DEV=${DEV:-cuda}; N=${N:-1024}; OUTD=${OUT:-/tmp/out}; mkdir -p $OUTD
R=/tmp/res; rm -rf $R; mkdir -p $R
S=/tmp/stage; B=$S/draftsmith
M=$PWD/.dev2/SmolLM2-135M-Instruct.Q4_1.gguf
[ -s $M ] || cat $S/model.a .dev2/model.b > $M
{ date; sha256sum $M; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; } 2>&1 | tee $R/machine.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s%N)
  timeout $t "$@" > $R/$name.out 2> $R/$name.err; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $R/steps.txt; tail -c 400 $R/$name.err; }
for m in "ar fixed" "tokenswift auto" "tokenswift fixed"; do set -- $m
  step ts-$1-$2 150 $B generate --device $DEV --model $M --method $1 --draft-policy $2 --drafter .dev2/tokenswift-demo \
    --prompt-file .dev2/prompt.txt --no-chat-template --ignore-eos --max-new-tokens $N --json
done
step distill 90 $B distill --device $DEV --model $M --data .dev2/sharegpt96.jsonl --limit 96 --max-new-tokens 64 \
  --max-prompt-tokens 256 --batch-size 32 --out $R/distilled
step train 120 $B train redrafter --device $DEV --model $M --data $R/distilled --out $R/redrafter --epochs 2
step eval 120 $B eval --device $DEV --model $M --methods ar,redrafter,prompt-lookup --drafter $R/redrafter \
  --prompts .dev2/question.jsonl --limit 8 --max-new-tokens 64 --out $R/eval
rm -rf $R/distilled/*.parquet $R/redrafter/checkpoint $R/redrafter/*.safetensors
tar czf $OUTD/res.tgz -C /tmp res; cat $R/steps.txt
