#!/usr/bin/env python3
"""Which earlier occurrence to copy from: replays prompt lookup's lookup over the `ar` answers of
an eval (its records.jsonl) position by position and scores three choices of the occurrence of
the last 3 (else 2, else 1) tokens whose continuation is drafted: the latest (prompt lookup up
to session 61), the one whose continuation is most frequent (the n-gram trie's first child), and
the one whose preceding context agrees longest with the end of the text (prompt lookup since
session 62). Prints, per choice, how often the first copied token is the answer's and the mean
number of tokens a 10-token chain agrees for; then the first token's acceptance by the agreeing
context's length (16 = 16 or more), and the log-loss of class-mean predictors of the first token
(in-sample), for the draft / node classes the draft policy could learn by.

    python3 copy_occurrences.py RUN/records.jsonl
"""
import collections
import json
import math
import sys

CAP = 16


def occurrences(seq, n):
    """Continuation starts of the earlier occurrences of the last n tokens of seq."""
    suffix = seq[-n:]
    return [s + n for s in range(len(seq) - n) if seq[s:s + n] == suffix]


def agreeing(seq, c):
    """How many tokens before continuation start c agree with the end of seq (at most CAP)."""
    k = 0
    while k < CAP and c - 1 - k >= 0 and seq[c - 1 - k] == seq[len(seq) - 1 - k]:
        k += 1
    return k


def agree_class(a, s):
    if s >= 2 and a >= s:
        return 0
    if s <= 1:
        return 1
    return 2 if 2 * a >= s else 3


def bucket(n):
    return n if n < 4 else 4 if n < 6 else 5 if n < 10 else 6 if n < 16 else 7


def main(path):
    runs = [json.loads(line) for line in open(path)]
    runs = [r for r in runs if r["method"] == "ar"]
    scores = collections.defaultdict(lambda: [0, 0, 0])
    by_len = collections.defaultdict(lambda: [0, 0])
    rows = []
    for r in runs:
        prompt, output = r["prompt_ids"], r["output_ids"]
        for t in range(len(output)):
            seq, truth = prompt + output[:t], output[t:]
            for n in (3, 2, 1):
                starts = occurrences(seq, n)
                if starts:
                    break
            if not starts:
                continue
            counts = collections.Counter(seq[s] for s in starts)
            top = counts.most_common(1)[0][0]
            best_len, best = max((agreeing(seq, s), s) for s in starts)
            picks = {
                "latest": starts[-1],
                "most frequent": max(s for s in starts if seq[s] == top),
                "longest context": best,
            }
            for name, s in picks.items():
                a = 0
                while a < 10 and s + a < len(seq) and a < len(truth) and seq[s + a] == truth[a]:
                    a += 1
                sc = scores[name]
                sc[0] += 1
                sc[1] += a > 0
                sc[2] += a
            by_len[best_len][0] += 1
            by_len[best_len][1] += seq[best] == truth[0]
            latest = starts[-1]
            agrees = sum(1 for s in starts if seq[s] == seq[latest])
            rows.append((n, agree_class(agrees, len(starts)), bucket(agreeing(seq, latest)), seq[latest] == truth[0]))
    for name, (steps, first, accepted) in scores.items():
        print(f"{name:16} positions {steps}  first token {first / steps:.3f}  mean chain {accepted / steps:.3f}")
    print("agreeing tokens: positions, first token of the longest-context occurrence right")
    for k in sorted(by_len):
        print(f"  {k:2d} {by_len[k][0]:6d} {by_len[k][1] / by_len[k][0]:.3f}")

    def log_loss(key):
        cells = collections.defaultdict(lambda: [0, 0])
        for row in rows:
            c = cells[key(row)]
            c[0] += 1
            c[1] += row[-1]
        total = 0.0
        for row in rows:
            n, a = cells[key(row)]
            p = (a + 0.5) / (n + 1)
            total -= math.log(p if row[-1] else 1 - p)
        return total / len(rows)

    print("log-loss of the latest occurrence's first token by class:")
    print(f"  matched n, agreement           {log_loss(lambda r: (r[0], r[1])):.4f}")
    print(f"  agreeing context, agreement    {log_loss(lambda r: (r[2], r[1])):.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
