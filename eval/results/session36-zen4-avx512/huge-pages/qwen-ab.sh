#!/bin/bash
# Huge pages off / on (DRAFTSMITH_HUGEPAGES=0 / default), alternating: Qwen2.5-Coder-1.5B Q4_K_M,
# `bench ar` decode ms/token and t(1), t(8) after 64 cached tokens.
BIN=${BIN:-draftsmith}
for i in $(seq 1 ${PAIRS:-2}); do for hp in 0 1; do
  DRAFTSMITH_HUGEPAGES=$hp $BIN bench ar --model qwen2.5-coder-1.5b --prompts 2 --max-new-tokens 32 --contexts 64 --curve-sizes 1,8 --curve-runs 10 --json 2>/dev/null | tail -1 | python3 -c "
import json,sys
d=json.loads(sys.stdin.read()); c={(x['shape'],x['n']):x['ms'] for x in d['verify_curve']}
print('huge pages $hp: decode %.2f ms/token, t(1) %.2f, t(8) %.2f, t(8)/t(1) %.2f' % (d['ms_per_token'], c[('chain',1)], c[('chain',8)], c[('chain',8)]/c[('chain',1)]))"
done; done
