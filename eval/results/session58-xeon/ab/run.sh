#!/usr/bin/env bash
# Session 58's A/B: the binary before (`f7e6707`, "head") against `0ba7e87` ("warm": verify
# timings, and so the draft policy's calibration, warmed as decoding does), alternating, three
# rounds, through scripts/eval_ab.sh; summarized with session 56's summ.py:
#     python3 eval/results/session56-xeon-resit/ab/summ.py eval/results/session58-xeon/ab > eval/results/session58-xeon/ab/summary.txt
set -euo pipefail
scripts/eval_ab.sh eval/results/session58-xeon/ab 3 head=/tmp/s58/ds-head warm=/tmp/s58/ds-cal
