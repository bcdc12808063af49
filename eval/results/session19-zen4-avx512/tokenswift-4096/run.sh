#!/usr/bin/env bash
# TokenSwift against `ar` from the 1536-token held-out prefix, 4096 new tokens, greedy then
# sampled (the commands of `just tokenswift-lengths` with max = sampled_max = 4096). `BIN`: the
# binary; `OUT`: where the runs go (default: here); `PROMPT`: the prefix (default: `$OUT/prompt.txt`).
set -euo pipefail
bin=${BIN:-draftsmith}
run=checkpoints/tokenswift-demo
out=${OUT:-eval/results/session19-zen4-avx512/tokenswift-4096}
prompt=${PROMPT:-$out/prompt.txt}
for mode in greedy sampled; do
    flags="--max-new-tokens 4096"
    if [ $mode = sampled ]; then flags="$flags --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed 0"; fi
    for method in ar tokenswift; do
        rm -f $out/$method-$mode.stats.jsonl
        $bin generate --method $method --drafter $run --prompt-file $prompt --no-chat-template \
            --ignore-eos $flags --json --stats-out $out/$method-$mode.stats.jsonl --stats-every 1024 > $out/$method-$mode.json
    done
done
python3 scripts/tokenswift_lengths.py $out > $out/table.md
