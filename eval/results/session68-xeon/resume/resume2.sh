#!/bin/bash
cd /work/main
for bin in ds68c ds68d; do
  echo "== greedy2 $bin start $(date -u +%H:%M:%S)"
  /tmp/$bin eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 20 --max-new-tokens 128 --turn-tokens 16 --out /tmp/s68/resume/greedy2-$bin > /tmp/s68/resume/greedy2-$bin.log 2>&1
  grep -E "^\| (ar|draft-model|post-use-precut) " /tmp/s68/resume/greedy2-$bin/report.md | cut -d'|' -f2,5,11,12,14 | head -3
done
echo "done $(date -u +%H:%M:%S)"
