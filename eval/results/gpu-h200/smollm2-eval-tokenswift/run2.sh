#!/bin/bash
# Device run 2 (session 17): TokenSwift greedy under `eval --device cuda` (near-tie check), fixed
# and auto drafts, on the first held-out 1536-token prefix, 1024 tokens.
set -u
cd "$(dirname "$0")/.."
OUTD=${OUT:-/tmp/out}; mkdir -p $OUTD
R=/tmp/res; rm -rf $R; mkdir -p $R
S=/tmp/stage; B=$S/draftsmith
M=$PWD/.dev2/SmolLM2-135M-Instruct.Q4_1.gguf
[ -s $M ] || cat $S/model.a .dev2/model.b > $M
{ date; sha256sum $M; nvidia-smi -L; } 2>&1 | tee $R/machine.txt
P=.dev2/tokenswift-demo/eval-prompts.jsonl
timeout 200 $B eval --device cuda --model $M --methods ar,tokenswift --draft-policy fixed --drafter .dev2/tokenswift-demo \
  --prompts $P --limit 1 --no-chat-template --max-new-tokens 1024 --out $R/ts-fixed > $R/fixed.out 2> $R/fixed.err
echo "fixed rc=$?"; tail -c 300 $R/fixed.err
timeout 120 $B eval --device cuda --model $M --methods ar,tokenswift --drafter .dev2/tokenswift-demo --reuse-ar-from $R/ts-fixed/records.jsonl \
  --prompts $P --limit 1 --no-chat-template --max-new-tokens 1024 --out $R/ts-auto > $R/auto.out 2> $R/auto.err
echo "auto rc=$?"; tail -c 300 $R/auto.err
for d in ts-fixed ts-auto; do grep -E "^\| (ar|tokenswift) |Near-ties|drift" $R/$d/report.md; done
rm -f $R/*/records.jsonl.tmp; tar czf $OUTD/res2.tgz -C /tmp res
