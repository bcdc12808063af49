#!/usr/bin/env python3
"""Replays prompt lookup over the `ar` outputs of an eval's records.jsonl, without the model.

At every position of every greedy output it drafts what prompt lookup drafts (the latest
occurrence of the longest matching 3..1-gram, 10 tokens; or, `majority`, the most frequent
continuation of the occurrences still in the running), with each token's agreement class, and
how many of the drafted tokens the target would accept. A policy then walks each output: the
draft length with the best expected (1 + accepted) / t(1 + length), acceptance per (match
length, depth, node class) as Beta counts learned online from the verified nodes — or also from
the token the target emits after the last verified one (`counterfactual`), or from the whole
draft (`oracle`). Costs: a verify curve t(n) / t(1), fixed. Prints tokens per target step and
the speedup over `ar` the curve implies.

    python3 replay_prompt_lookup.py eval/results/<run>/records.jsonl
"""
import json
import sys
from collections import defaultdict

# t(n)/t(1): the session-19 bench curve after 64 cached tokens (quiet host), and the costs the
# session-19 MT-Bench run measured per verified size inside the run (loud host).
CURVES = {
    "bench": {1: 1.0, 2: 1.03, 3: 1.1, 4: 1.2, 5: 1.36, 6: 1.52, 7: 1.68, 8: 1.84, 9: 2.2, 10: 2.6, 11: 3.0},
    "in-run": {1: 1.0, 2: 1.08, 3: 1.32, 4: 1.55, 5: 1.75, 6: 2.0, 7: 2.2, 8: 2.4, 9: 2.9, 10: 3.1, 11: 3.2},
}


def agreement_class(agrees, seen):
    if seen >= 2 and agrees >= seen:
        return 0
    if seen <= 1:
        return 1
    return 2 if 2 * agrees >= seen else 3


class Index:
    """Where every n-gram (n ≤ max_n) of a growing token list went on."""

    def __init__(self, tokens, max_n):
        self.t, self.max_n = [], max_n
        self.at = [defaultdict(list) for _ in range(max_n + 1)]
        for tok in tokens:
            self.push(tok)

    def push(self, tok):
        self.t.append(tok)
        end = len(self.t)
        for n in range(1, min(self.max_n, end) + 1):
            self.at[n][tuple(self.t[end - n:end])].append(end)

    def continuations(self, n):
        end = len(self.t)
        return [s for s in self.at[n].get(tuple(self.t[end - n:]), []) if s < end] if end > n else []


def draft(index, k, variant):
    t = index.t
    for n in range(index.max_n, 0, -1):
        live = index.continuations(n)
        if live:
            break
    else:
        return 0, [], []
    tokens, classes = [], []
    for j in range(k):
        live = [f for f in live if f + j < len(t)]
        if not live:
            break
        if variant == "latest":
            if j == 0:
                latest = live[-1]
            if latest + j >= len(t):
                break
            tok = t[latest + j]
        else:
            counts = defaultdict(int)
            for f in live:
                counts[t[f + j]] += 1
            tok = max(counts, key=lambda x: (counts[x], max(f for f in live if t[f + j] == x)))
        agrees = sum(1 for f in live if t[f + j] == tok)
        tokens.append(tok)
        classes.append(agreement_class(agrees, len(live)))
        live = [f for f in live if t[f + j] == tok]
    return n, tokens, classes


def positions(records, variant, k=10, max_n=3):
    """Per output, per position: (match length, node classes, tokens the target accepts)."""
    out = []
    for r in records:
        index, o, per = Index(r["prompt_ids"], max_n), r["output_ids"], []
        for i in range(len(o)):
            n, d, cls = draft(index, k, variant)
            a = 0
            while a < len(d) and i + a < len(o) and d[a] == o[i + a]:
                a += 1
            per.append((n, cls, a))
            index.push(o[i])
        out.append(per)
    return out


def walk(data, curve, learn):
    counts = defaultdict(lambda: [0.0, 0.0])

    def p(n, c, d):
        prior = 0.5 if d == 1 else p(n, c, d - 1)
        acc, tries = counts[(n, c, min(d, 16))]
        return (acc + 2 * prior) / (tries + 2)

    def observe(n, c, d, ok):
        counts[(n, c, min(d, 16))][0] += ok
        counts[(n, c, min(d, 16))][1] += 1

    tokens = cost = steps = drafting = 0
    for per in data:
        i = 0
        while i < len(per):
            n, cls, a = per[i]
            best, gain, path = (1 / curve[1], 0), 1.0, 1.0
            for length in range(1, len(cls) + 1):
                path *= p(n, cls[length - 1], length)
                gain += path
                if gain / curve[1 + length] > best[0]:
                    best = (gain / curve[1 + length], length)
            length = best[1]
            accepted = min(a, length)
            last = len(cls) if learn == "oracle" else length + (learn == "counterfactual" and accepted == length)
            for j in range(min(last, len(cls))):
                if j > a:
                    break
                observe(n, cls[j], j + 1, j < a)
            got = min(1 + accepted, len(per) - i)
            tokens, cost, steps, drafting = tokens + got, cost + curve[1 + length], steps + 1, drafting + (length > 0)
            i += got
    return tokens / steps, tokens / cost, drafting / steps


if __name__ == "__main__":
    records = [json.loads(line) for line in open(sys.argv[1])]
    records = [r for r in records if r["method"] == "ar"]
    print("variant   learning        curve   tau    speedup  drafting steps")
    for variant in ["latest", "majority"]:
        data = positions(records, variant)
        for learn in ["verified", "counterfactual", "oracle"]:
            for name, curve in CURVES.items():
                tau, speedup, drafting = walk(data, curve, learn)
                print(f"{variant:9} {learn:15} {name:7} {tau:.3f}  {speedup:.3f}    {100 * drafting:.0f} %")
