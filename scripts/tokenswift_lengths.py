#!/usr/bin/env python3
"""Table of a TokenSwift long-generation run (`just tokenswift-lengths`).

Reads `<dir>/<method>-<mode>.json` (`draftsmith generate --json`) and
`<dir>/<method>-<mode>.stats.jsonl` (`--stats-out`, a line every 1024 tokens) for
method in {ar, tokenswift} and mode in {greedy, sampled}, and prints a Markdown table
with, at each checkpoint: tokens/s of both methods, the speedup, TokenSwift's α and β,
Distinct-1..4 of each output and the peak RSS; for greedy runs, whether TokenSwift's
ids equal ar's up to that point. The 1K/2K/4K rows are the first tokens of the longest
run (greedy decoding does not depend on the length limit); the last row is where the run
ended, which for SmolLM2 (8K context) and a 1.5K-token prefix is the model's context at 6656
new tokens, short of 8K.
"""
import json
import sys
from pathlib import Path


def load(d: Path, method: str, mode: str):
    stats = d / f"{method}-{mode}.stats.jsonl"
    if not stats.exists():
        return None, []
    lines = [json.loads(l) for l in stats.read_text().splitlines() if l.strip()]
    out = d / f"{method}-{mode}.json"
    ids = None
    if out.exists() and out.stat().st_size > 0:
        ids = json.loads(out.read_text())["output_ids"]
    return ids, lines


def at(lines, n):
    """The first statistics line at or past n tokens (the final line if the run stopped sooner)."""
    for l in lines:
        if l["tokens"] >= n:
            return l
    return None


def fmt(v, p=2):
    return "–" if v is None else f"{v:.{p}f}"


HEADER = """# tokenswift-lengths

TokenSwift (checkpoints/tokenswift-demo, tree [1,3,3,3], k = 20, dynamic KV B = 1024) vs ar on one
1536-token prefix of a held-out book (`prompt.txt`), SmolLM2-135M. Greedy: the lossless check on
every prefix. Sampled: T = 1, min-p 0.1, θ = 1.2, W = 1024, seed 0 (both methods sample the
target's distribution, with different draws).

Command: `just tokenswift-lengths` (statistics every 1024 tokens; each row is the first N tokens
of one run; the last row is where the run ended — for SmolLM2, the model's 8K context).
"""


def main():
    d = Path(sys.argv[1])
    print(HEADER)
    print("| mode | tokens | ar tok/s | TokenSwift tok/s | speedup | α | β | τ | Distinct-4 ar / TS | peak RSS MB ar / TS | ids == ar |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode in ["greedy", "sampled"]:
        ar_ids, ar = load(d, "ar", mode)
        ts_ids, ts = load(d, "tokenswift", mode)
        if not ar or not ts:
            continue
        top = min(ar[-1]["tokens"], ts[-1]["tokens"])
        checkpoints = [n for n in [1024, 2048, 4096, 8192, 16384, 32768] if n <= top]
        if not checkpoints or top > checkpoints[-1]:
            checkpoints.append(top)  # the end of the run (the length limit, EOS or the model's context)
        for n in checkpoints:
            a, t = at(ar, n), at(ts, n)
            if a is None or t is None:
                continue
            same = "–"
            if mode == "greedy" and ar_ids is not None and ts_ids is not None:
                k = min(n, len(ar_ids), len(ts_ids))
                same = "yes" if ar_ids[:k] == ts_ids[:k] else "NO"
            elif mode == "greedy":
                same = "(run incomplete)"
            speed = t["tokens_per_s"] / a["tokens_per_s"] if a["tokens_per_s"] else None
            print(f"| {mode} | {t['tokens']} | {fmt(a['tokens_per_s'], 1)} | {fmt(t['tokens_per_s'], 1)} | {fmt(speed)}× | "
                  f"{fmt(t.get('alpha'))} | {fmt(t.get('beta'))} | {fmt(t.get('tokens_per_step'))} | "
                  f"{fmt(a['distinct_n'][3])} / {fmt(t['distinct_n'][3])} | {fmt(a.get('peak_rss_mb'), 0)} / {fmt(t.get('peak_rss_mb'), 0)} | {same} |")


if __name__ == "__main__":
    main()
