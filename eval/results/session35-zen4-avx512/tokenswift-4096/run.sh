#!/usr/bin/env bash
# #13's TokenSwift bar: `ar` and TokenSwift (`auto`, the default: verify-pass) from the 1536-token
# held-out prefix (prompt 0 of checkpoints/tokenswift-demo/eval-prompts.jsonl, `just
# train-tokenswift`), 4096 new tokens, EOS ignored; greedy in ROUNDS alternating rounds, then one
# sampled pair (T = 1, min-p 0.1, θ = 1.2, W = 1024, seed 0). `BIN`: the binary; `OUT`: where the
# runs go (default: here). Prints tok/s per run and whether each greedy TokenSwift run gave `ar`'s ids.
set -euo pipefail
bin=${BIN:-draftsmith}
out=${OUT:-eval/results/session35-zen4-avx512/tokenswift-4096}
rounds=${ROUNDS:-2}
run=checkpoints/tokenswift-demo
prompt=$out/prompt.txt
sed -n 1p $run/eval-prompts.jsonl | python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["prompt"])' > $prompt
gen() { # name, flags…
    local name=$1; shift
    $bin generate --drafter $run --prompt-file $prompt --no-chat-template --ignore-eos --max-new-tokens 4096 \
        --json --stats-out $out/$name.stats.jsonl --stats-every 1024 "$@" > $out/$name.json
    python3 - $out/$name.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[1].rsplit('/', 1)[1], d['method'], round(d['decode_tokens_per_s'], 1), 'tok/s,', d['target_calls'], 'target calls')
PY
}
for r in $(seq 1 $rounds); do
    rm -f $out/ar-greedy-$r.stats.jsonl $out/tokenswift-greedy-$r.stats.jsonl
    gen ar-greedy-$r --method ar
    gen tokenswift-greedy-$r --method tokenswift
    python3 -c "import json; a=json.load(open('$out/ar-greedy-$r.json'))['output_ids']; b=json.load(open('$out/tokenswift-greedy-$r.json'))['output_ids']; print('round $r: ids == ar:', a == b)"
done
sampled="--temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed 0"
rm -f $out/ar-sampled.stats.jsonl $out/tokenswift-sampled.stats.jsonl
gen ar-sampled --method ar $sampled
gen tokenswift-sampled --method tokenswift $sampled
