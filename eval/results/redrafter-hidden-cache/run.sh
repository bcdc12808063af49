#!/usr/bin/env bash
# The demo drafter trained online (the target's hidden states computed at the start) and from a
# `draftsmith hidden` cache, same seed and steps, side by side on one machine (issue 15 item 1).
# Usage: bash eval/results/redrafter-hidden-cache/run.sh [OUT]  (from the repository root; needs
# the release binary and the demo dataset of `just distill`). Writes OUT/{online,hidden,cached},
# prints wall times, peak RSS and disk, then the comparison (compare.py).
set -euo pipefail
bin="${CARGO_TARGET_DIR:-target}/release/draftsmith"
out="${1:-/tmp/draftsmith-hidden-cache}"
data=data/distilled/smollm2-135m-sharegpt-demo
rm -rf "$out"; mkdir -p "$out"
# The demo's `just train-redrafter` settings, with two epochs.
train=(train redrafter --model smollm2-135m --data "$data" --horizon 4 --epochs 2)
timed() { local label=$1; shift; /usr/bin/time -f "$label: wall %e s, peak RSS %M KB" "$@" >/dev/null 2>"$out/$label.log" || { cat "$out/$label.log"; exit 1; }; tail -1 "$out/$label.log"; }
lscpu | grep -E "^Model name|^CPU\(s\)" | sed 's/  */ /g'
grep -o -E 'avx512[a-z_]*|avx_vnni|amx[a-z_0-9]*|avx2|fma|f16c' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
timed online "$bin" "${train[@]}" --out "$out/online" --online
cp "$out/online/summary.json" "$out/online-summary.json"  # the reruns below rewrite summary.json
timed hidden "$bin" hidden --model smollm2-135m --data "$data" --out "$out/hidden"
echo "cache on disk: $(du -sb "$out/hidden" | cut -f1) bytes"
timed cached "$bin" "${train[@]}" --out "$out/cached" --hidden "$out/hidden"
cp "$out/cached/summary.json" "$out/cached-summary.json"
# Rerunning a finished run restarts from its last checkpoint: what a resume costs before the
# first new step.
timed rerun-online "$bin" "${train[@]}" --out "$out/online" --online
timed rerun-cached "$bin" "${train[@]}" --out "$out/cached" --hidden "$out/hidden"
python3 "$(dirname "$0")/compare.py" "$out"
