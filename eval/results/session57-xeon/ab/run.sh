#!/usr/bin/env bash
# Session 57 A/B: `ds-w12` (AVX-512 tiles of up to 12 rows, e64f9c2) against `ds-head` (main at
# 9a8b3bf, tiles of 8), alternating, two rounds; every eval has `ar` side by side. (Written out
# by hand when it ran; the same commands in the same order as this call.)
set -euo pipefail
exec scripts/eval_ab.sh "${OUT:-eval/runs/s57ab}" 2 w12=/tmp/s57/ds-w12 head=/tmp/s57/ds-head
