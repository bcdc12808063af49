#!/bin/bash
# Qwen pair greedy (every-method's command) with the binary before (ds68c) and after (ds68d) the resume probe, alternating; then T=1 argmax with the new one.
cd /work/main
for bin in ds68d ds68c; do
  echo "== greedy $bin start $(date -u +%H:%M:%S)"
  /tmp/$bin eval --model qwen2.5-coder-1.5b --methods ar,draft-model,post-use-precut \
    --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
    --limit 20 --max-new-tokens 128 --turn-tokens 16 --out /tmp/s68/resume/greedy-$bin > /tmp/s68/resume/greedy-$bin.log 2>&1
  grep -E "^\| (ar|draft-model|post-use-precut) " /tmp/s68/resume/greedy-$bin/report.md | cut -d'|' -f2,5,11,12,14 | head -3
done
echo "== T1 argmax ds68d start $(date -u +%H:%M:%S)"
/tmp/ds68d eval --model qwen2.5-coder-1.5b --methods ar,draft-model \
  --draft-model qwen2.5-coder-0.5b --draft-len 6 --draft-vocab 65536 --prompts humaneval \
  --limit 20 --max-new-tokens 128 --turn-tokens 16 --temperature 1.0 --seed 0 \
  --draft-tokens argmax --out /tmp/s68/resume/T1-argmax-ds68d > /tmp/s68/resume/T1-argmax.log 2>&1
grep -E "^\| (ar|draft-model) " /tmp/s68/resume/T1-argmax-ds68d/report.md | cut -d'|' -f2,5,11,12,14 | head -2
echo "done $(date -u +%H:%M:%S)"
