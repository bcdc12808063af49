#!/usr/bin/env bash
# Two-process sharded distillation against one process, on one machine (issue 15 item 2).
# Usage: bash eval/results/distill-shards/run.sh [OUT]  (from the repository root; needs the
# release binary and pyarrow). Writes OUT/{single,parts}, prints timings and the comparison.
set -euo pipefail
bin="${CARGO_TARGET_DIR:-target}/release/draftsmith"
out="${1:-/tmp/draftsmith-distill-shards}"
rm -rf "$out"; mkdir -p "$out"
common=(--model smollm2-135m --data sharegpt --limit 32 --max-new-tokens 96 --max-prompt-tokens 256
        --temperature 0.8 --seed 7 --inputs-per-shard 8)
lscpu | grep -E "^Model name|^CPU\(s\)" | sed 's/  */ /g'
echo "single process:"
/usr/bin/time -f "  wall %e s, peak RSS %M KB" "$bin" distill "${common[@]}" --out "$out/single" >/dev/null
echo "two processes at once (--shard 0/2, --shard 1/2):"
start=$(date +%s.%N)
/usr/bin/time -f "  part 0: wall %e s, peak RSS %M KB" "$bin" distill "${common[@]}" --shard 0/2 --out "$out/parts" >/dev/null &
/usr/bin/time -f "  part 1: wall %e s, peak RSS %M KB" "$bin" distill "${common[@]}" --shard 1/2 --out "$out/parts" >/dev/null &
wait
echo "  both done after $(echo "$(date +%s.%N) - $start" | bc) s"
python3 "$(dirname "$0")/compare.py" "$out/single" "$out/parts"
