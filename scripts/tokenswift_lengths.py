#!/usr/bin/env python3
"""Table of a TokenSwift long-generation run (`just tokenswift-lengths`).

Reads `<dir>/<method>-<mode>.json` (`draftsmith generate --json`) and
`<dir>/<method>-<mode>.stats.jsonl` (`--stats-out`, a line every 1024 tokens) for
method in {ar, tokenswift} and mode in {greedy, sampled}, and prints a Markdown table
with, at each checkpoint: tokens/s of both methods, the speedup, TokenSwift's α and β,
Distinct-1..4 of each output and the peak RSS; for greedy runs, whether TokenSwift's
ids equal ar's up to that point. The 1K/2K/4K rows are the first tokens of the longest
run (greedy decoding does not depend on the length limit).
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


def main():
    d = Path(sys.argv[1])
    print("| mode | tokens | ar tok/s | TokenSwift tok/s | speedup | α | β | τ | Distinct-4 ar / TS | peak RSS MB ar / TS | ids == ar |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode in ["greedy", "sampled"]:
        ar_ids, ar = load(d, "ar", mode)
        ts_ids, ts = load(d, "tokenswift", mode)
        if not ar or not ts:
            continue
        top = max(l["tokens"] for l in ts + ar)
        for n in [1024, 2048, 4096, 8192, 16384, 32768]:
            if n > top:
                break
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
