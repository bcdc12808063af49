#!/usr/bin/env bash
# Alternating A/B of two or more `draftsmith` binaries on the two greedy evals the draft-policy
# work is judged on: all 80 MT-Bench first turns × 256 tokens with every method but TokenSwift,
# and the 60 context tasks × 128 with prompt lookup and the n-gram trie; `ar` runs side by side
# in every eval, and the binaries take turns round by round, so a host that drifts moves them
# alike.
#
#     scripts/eval_ab.sh OUT ROUNDS [NAME=]BIN_A [NAME=]BIN_B [...]
#
# writes OUT/r<round>/<NAME>-mtbench80 and -context60 (NAME: the binary's file name unless
# given). Needs the drafter `just pipeline` trains (checkpoints/redrafter-demo) and
# data/context-tasks.jsonl (`just context-tasks`). Copy each binary out of the cargo target dir
# first: a build there replaces it. Sessions 56 and 57 ran it through their `ab/run.sh`.
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 OUT ROUNDS [NAME=]BIN_A [NAME=]BIN_B [...]" >&2
    exit 2
fi
out=$1 rounds=$2
shift 2
for need in checkpoints/redrafter-demo data/context-tasks.jsonl "${@#*=}"; do
    [ -e "$need" ] || { echo "missing: $need" >&2; exit 1; }
done
for round in $(seq "$rounds"); do
    for arg in "$@"; do
        bin=${arg#*=}
        name=$(basename "$bin")
        [ "$arg" = "$bin" ] || name=${arg%%=*}
        "$bin" eval --methods ar,prompt-lookup,ngram-trie,token-cache,redrafter \
            --drafter checkpoints/redrafter-demo --prompts mt-bench --max-new-tokens 256 \
            --turn-tokens 32 --out "$out/r$round/$name-mtbench80"
        "$bin" eval --methods ar,prompt-lookup,ngram-trie --prompts data/context-tasks.jsonl \
            --max-new-tokens 128 --turn-tokens 32 --out "$out/r$round/$name-context60"
    done
done
