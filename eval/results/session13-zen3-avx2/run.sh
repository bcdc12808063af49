#!/usr/bin/env bash
# Session 13 side by side (AVX2-only machine): the engine before this session's changes (OLD, a
# release build of 365ee3d) against this one (NEW), alternated in one run on one machine.
#   1. `bench ar` verify cost curve, twice per binary (OLD, NEW, OLD, NEW);
#   2. `eval` ar + redrafter (demo drafter, 20 MT-Bench first turns × 128 tokens, beam width 1)
#      with `--draft-policy fixed` and `auto`, each binary measuring its own `ar` in the same run;
#   3. `eval` ar + prompt-lookup (`auto`) on the same prompts.
# Usage: OLD=/path/to/old/draftsmith bash eval/results/session13-zen3-avx2/run.sh [OUT]
# (from the repository root; needs checkpoints/redrafter-demo from `just pipeline`).
set -euo pipefail
new="${CARGO_TARGET_DIR:-target}/release/draftsmith"
old="${OLD:?set OLD to a release binary built from 365ee3d}"
out="${1:-/tmp/draftsmith-session13}"
mkdir -p "$out"
lscpu | grep -E "^Model name|^CPU\(s\)|^CPU family|^Model:" | sed 's/  */ /g'
grep -o -E 'avx512[a-z_]*|avx_vnni|amx[a-z_0-9]*|avx2|fma|f16c' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
curve=(bench ar --prompts 2 --max-new-tokens 32 --curve-sizes 1,2,3,4,6,8,12,16,32,64 --contexts 64,2048 --json)
for round in 1 2; do
  for v in old new; do
    bin=$old; [ "$v" = new ] && bin=$new
    echo "bench ar: $v, round $round"
    "$bin" "${curve[@]}" 2>/dev/null | tail -1 > "$out/bench-$v-$round.json"
  done
done
ev=(eval --methods ar,redrafter --drafter checkpoints/redrafter-demo --prompts mt-bench --limit 20 --max-new-tokens 128 --beam-width 1)
for policy in fixed auto; do
  for v in old new; do
    bin=$old; [ "$v" = new ] && bin=$new
    rm -rf "$out/eval-$v-$policy"
    echo "eval redrafter: $v, $policy"
    "$bin" "${ev[@]}" --draft-policy "$policy" --out "$out/eval-$v-$policy" 2>&1 | grep -E '^(ar|redrafter) '
  done
done
# Prompt lookup under `auto` on the same prompts: what the faster 1-token step does to a method
# whose drafts cost nothing.
pl=(eval --methods ar,prompt-lookup --prompts mt-bench --limit 20 --max-new-tokens 128 --draft-policy auto)
for v in old new; do
  bin=$old; [ "$v" = new ] && bin=$new
  rm -rf "$out/eval-$v-lookup"
  echo "eval prompt-lookup: $v"
  "$bin" "${pl[@]}" --out "$out/eval-$v-lookup" 2>&1 | grep -E '^(ar|prompt-lookup) '
done
python3 "$(dirname "$0")/summarize.py" "$out"
