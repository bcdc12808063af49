#!/bin/bash
# Transparent huge pages on (the default from session 36: the binary re-executes itself with
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1) against off (DRAFTSMITH_HUGEPAGES=0), alternating
# pair by pair: `bench ar` on SmolLM2-135M Q4_1, 64 cached tokens.
BIN=${BIN:-draftsmith}
for i in $(seq 1 ${PAIRS:-6}); do
  for mode in off on; do
    if [ $mode = on ]; then unset DRAFTSMITH_HUGEPAGES; else export DRAFTSMITH_HUGEPAGES=0; fi
    $BIN bench ar --prompts 1 --max-new-tokens 64 --contexts 64 --curve-sizes 1,8,64 --curve-runs 30 --json 2>/dev/null | tail -1 | python3 -c "
import json,sys
d=json.loads(sys.stdin.read())
c={(x['shape'],x['n']):x['ms'] for x in d['verify_curve'] if x['context']==64}
print('$mode', d['machine']['huge_pages'] + ':', 'ms/token %.3f  t(1) %.2f  t(8) %.2f  t(64) %.2f  t(8)/t(1) %.2f  t(64)/t(1) %.2f' % (d['ms_per_token'], c[('chain',1)], c[('chain',8)], c[('chain',64)], c[('chain',8)]/c[('chain',1)], c[('chain',64)]/c[('chain',1)]))
"
  done
done
