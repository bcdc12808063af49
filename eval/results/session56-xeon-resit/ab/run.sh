#!/usr/bin/env bash
# Session 56 A/B: `ds-tile` (the cost model's tile edges, this session's change) against
# `ds-head` (main at 6cc6a0b), alternating, two rounds; every eval has `ar` side by side.
# (Written out by hand when it ran; the same commands in the same order as this call.)
set -euo pipefail
exec scripts/eval_ab.sh "${OUT:-eval/runs/s56ab}" 2 tile=/tmp/s56/ds-tile head=/tmp/s56/ds-head
