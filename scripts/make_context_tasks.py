#!/usr/bin/env python3
"""Builds context-heavy prompt sets (the N-Gram Trie paper evaluates on tasks whose answers
reuse the context: summarisation, retrieval QA, code editing). PG-19, CNN/DailyMail and the
paper's own sets are not available offline, so the tasks are built from the fetched
public-domain texts (`draftsmith fetch gutenberg`, `draftsmith fetch kjv`):

- `summarize`: a passage, then "Summarize the passage above in a few sentences."
- `extract`: a passage, then "List every line spoken by <SPEAKER> in the passage above, word for word."
  (Shakespeare passages only; the answer copies the context, like retrieval QA.)
- `kjv-explain`: a run of verses, then "Explain these verses in plain English, quoting each verse first."

Output: one JSON object per line with `id`, `task`, `source` and `prompt`, ready for
`draftsmith eval --prompts <file>`. Passages are cut at line boundaries to about
`--chars` characters; selection is deterministic (`--seed`).

Usage: python3 scripts/make_context_tasks.py --gutenberg <dir> [--kjv <kjv.txt>] --out data/context-tasks.jsonl [--per-task 20]
"""
import argparse
import json
import random
import re
from pathlib import Path


def passages(text, chars, rng, count):
    lines = [l for l in text.splitlines()]
    out = []
    for _ in range(count * 20):
        if len(out) == count:
            break
        start = rng.randrange(len(lines) // 10, max(len(lines) // 10 + 1, len(lines) - 200))
        chunk, size = [], 0
        for line in lines[start:]:
            chunk.append(line)
            size += len(line) + 1
            if size >= chars:
                break
        body = "\n".join(chunk).strip()
        if len(body) >= chars * 0.8:
            out.append(body)
    return out


def speakers(passage):
    names = re.findall(r"^\s*([A-Z][A-Z]+(?: [A-Z]+)?)\.", passage, re.M)
    return sorted({n for n in names if names.count(n) >= 2})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gutenberg", required=True, type=Path)
    ap.add_argument("--kjv", type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--per-task", type=int, default=20)
    ap.add_argument("--chars", type=int, default=1800)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = sorted(args.gutenberg.glob("*.txt"))
    records = []
    for i in range(args.per_task):
        path = texts[rng.randrange(len(texts))]
        body = passages(path.read_text(errors="replace"), args.chars, rng, 1)[0]
        records.append({"id": f"summarize-{i}", "task": "summarize", "source": path.name,
                        "prompt": f"{body}\n\nSummarize the passage above in a few sentences."})
    made = 0
    while made < args.per_task:
        path = texts[rng.randrange(len(texts))]
        body = passages(path.read_text(errors="replace"), args.chars, rng, 1)[0]
        names = speakers(body)
        if not names:
            continue
        who = names[rng.randrange(len(names))]
        records.append({"id": f"extract-{made}", "task": "extract", "source": path.name,
                        "prompt": f"{body}\n\nList every line spoken by {who} in the passage above, word for word."})
        made += 1
    if args.kjv:
        verses = args.kjv.read_text().splitlines()
        for i in range(args.per_task):
            start = rng.randrange(len(verses) - 12)
            body = "\n".join(verses[start:start + 10])
            records.append({"id": f"kjv-explain-{i}", "task": "kjv-explain", "source": "kjv.txt",
                            "prompt": f"{body}\n\nExplain these verses in plain English, quoting each verse first."})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
