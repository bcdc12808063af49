#!/usr/bin/env bash
# Every method against `ar` with one binary in one sitting, as in the README's "What it does
# today" table (`just every-method`): each eval runs `ar` side by side, the generations of a
# prompt taking turns on the machine (`--turn-tokens`) so that all of them see the same stretches
# of a shared host; greedy runs are checked token for token against `ar`. First the verify cost
# curve (`bench ar`). `BIN`: the binary; `OUT`: a directory (each eval resumes if rerun).
# Needs `just pipeline` (or `just distill && just train-redrafter`) for checkpoints/redrafter-demo,
# `just train-tokenswift` for checkpoints/tokenswift-demo, `just context-tasks` for
# data/context-tasks.jsonl; the Qwen pair is fetched on first use (~1.4 GB).
set -euo pipefail
BIN=${BIN:-draftsmith}
OUT=${OUT:?an output directory}
mkdir -p "$OUT"
for need in checkpoints/redrafter-demo checkpoints/tokenswift-demo data/context-tasks.jsonl; do
    [ -e "$need" ] || { echo "missing $need (see the comment at the top of $0)" >&2; exit 1; }
done
"$BIN" bench ar --prompts 1 --max-new-tokens 16 --contexts 64 --curve-sizes 1,2,4,8,16,64 \
    --curve-runs 30 --json > "$OUT/bench-ar-smollm2.json"
"$BIN" eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
    --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
    --turn-tokens 32 --out "$OUT/mtbench80"
"$BIN" eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
    --max-new-tokens 128 --turn-tokens 32 --out "$OUT/context60"
"$BIN" eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 20 --max-new-tokens 128 --turn-tokens 16 --out "$OUT/qwen-pair"
# The same pair sampled: the draft model draws its drafts (`--draft-tokens sample`, the default).
"$BIN" eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 20 --max-new-tokens 128 --turn-tokens 16 --temperature 0.7 --seed 0 \
    --out "$OUT/qwen-pair-sampled"
"$BIN" eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "$OUT/tokenswift-greedy"
"$BIN" eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 \
    --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed 0 \
    --out "$OUT/tokenswift-sampled"
"$BIN" eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
    --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
    --temperature 0.7 --seed 0 --turn-tokens 32 --out "$OUT/mtbench80-sampled"
