#!/usr/bin/env bash
# #13's Qwen pair bars (draft-model ≥ 1.4× `ar`, post-use-precut ≥ draft-model): Qwen2.5-Coder-0.5B
# drafting for 1.5B, 20 HumanEval prompts × 128 tokens, `auto`, the three generations of each
# prompt taking turns on the machine every 16 new tokens (`eval --turn-tokens 16`), so the two
# methods and `ar` see the same stretches of the host. `BIN`: the binary; `OUT`: the eval directory.
set -euo pipefail
${BIN:-draftsmith} eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval --limit 20 \
    --max-new-tokens 128 --draft-policy auto --turn-tokens 16 --out "${OUT:?an eval directory}"
