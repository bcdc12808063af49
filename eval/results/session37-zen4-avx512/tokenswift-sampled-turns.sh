#!/usr/bin/env bash
# #13's TokenSwift sampled bar with the two generations taking turns on the machine every 256
# new tokens (`eval --turn-tokens`, sampled since session 37): `ar` and TokenSwift (`auto`) from the
# 1536-token held-out prefix (prompt 0 of checkpoints/tokenswift-demo/eval-prompts.jsonl, `just
# train-tokenswift`), exactly 4096 new tokens, T = 1, min-p 0.1, contextual penalty θ = 1.2 over
# W = 1024 (TokenSwift's sampling), seed `SEED` (0). `BIN`: the binary; `OUT`: the eval directory.
set -euo pipefail
${BIN:-draftsmith} eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 \
    --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed ${SEED:-0} \
    --out "${OUT:?an eval directory}"
