#!/usr/bin/env bash
# #13's TokenSwift sampled bar: `ar` and TokenSwift (`auto`) from the 1536-token held-out prefix,
# 4096 new tokens, EOS ignored, T = 1, min-p 0.1, contextual penalty θ = 1.2 over W = 1024, seed 0;
# PAIRS pairs, the order alternating (ar first in odd pairs). `BIN`: the binary; `OUT`: a directory.
set -euo pipefail
bin=${BIN:-draftsmith}; out=${OUT:?a directory}; mkdir -p $out
run=checkpoints/tokenswift-demo
sed -n 1p $run/eval-prompts.jsonl | python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["prompt"])' > $out/prompt.txt
gen() { # name, method
    $bin generate --drafter $run --prompt-file $out/prompt.txt --no-chat-template --ignore-eos --max-new-tokens 4096 \
        --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed 0 --json --method $2 > $out/$1.json
    python3 -c "import json; d=json.load(open('$out/$1.json')); print('$1', round(d['decode_tokens_per_s'],1), 'tok/s')"
}
for p in $(seq 1 ${PAIRS:-4}); do
    if [ $((p % 2)) = 1 ]; then gen ar-$p ar; gen tokenswift-$p tokenswift; else gen tokenswift-$p tokenswift; gen ar-$p ar; fi
    python3 -c "import json; a=json.load(open('$out/ar-$p.json'))['decode_tokens_per_s']; t=json.load(open('$out/tokenswift-$p.json'))['decode_tokens_per_s']; print('pair $p: %.2fx' % (t/a))"
done
