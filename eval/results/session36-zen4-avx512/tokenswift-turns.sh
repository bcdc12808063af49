#!/usr/bin/env bash
# #13's TokenSwift greedy bar with the two generations taking turns on the machine every 256
# new tokens (`eval --turn-tokens`): `ar` and TokenSwift (`auto`: verify-pass) from the 1536-token
# held-out prefix (prompt 0 of checkpoints/tokenswift-demo/eval-prompts.jsonl, `just
# train-tokenswift`), exactly 4096 new tokens. `BIN`: the binary; `OUT`: the eval directory.
set -euo pipefail
${BIN:-draftsmith} eval --methods ar,tokenswift --drafter checkpoints/tokenswift-demo \
    --prompts checkpoints/tokenswift-demo/eval-prompts.jsonl --limit 1 --no-chat-template \
    --ignore-eos --max-new-tokens 4096 --turn-tokens 256 --out "${OUT:?an eval directory}"
