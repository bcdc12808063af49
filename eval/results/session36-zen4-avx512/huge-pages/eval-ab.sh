#!/bin/bash
# Huge pages off (DRAFTSMITH_HUGEPAGES=0) / on (the default), alternating: `ar` and prompt
# lookup on 20 MT-Bench first turns × 128 tokens, ms per token of each.
BIN=${BIN:-draftsmith}
for i in $(seq 1 ${PAIRS:-3}); do for hp in 0 1; do
  rm -rf /tmp/hpab; DRAFTSMITH_HUGEPAGES=$hp $BIN eval --methods ar,prompt-lookup --prompts mt-bench --limit 20 --max-new-tokens 128 --out /tmp/hpab --json 2>/dev/null | tail -1 | python3 -c "
import json,sys; d=json.loads(sys.stdin.read())['methods']; print('huge pages $hp: ar %.3f ms/token, prompt lookup %.3f (%.2fx)' % (d['ar']['decode_ms_per_token'], d['prompt-lookup']['decode_ms_per_token'], d['prompt-lookup']['speedup']))"
done; done
