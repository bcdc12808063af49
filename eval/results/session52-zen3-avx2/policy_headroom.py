#!/usr/bin/env python3
"""How much of prompt lookup's possible speedup the draft policy takes, on one eval's records.

Reads an eval directory's records.jsonl.gz with `ar` and `prompt-lookup` on the same prompts
(greedy), and prices steps with the run's own verify times: the median, over the run's
prompt-lookup steps with d draft tokens, of the step's verify ms over its prompt's `ar` ms per
token. Replays prompt lookup offline on `ar`'s output (its defaults: the latest earlier
occurrence of the last 3, else 2, else 1 tokens; the 10 tokens after it; each token's agreement
class, as `draftsmith-decode`'s `prompt_lookup.rs`) and prints the speedup over the decode steps
(prefill and drafting time left out) of:

* the run's own steps (its draft sizes at the median costs);
* fixed draft lengths k (every step drafts min(k, available));
* an oracle that knows each draft's accepted length and plans the whole answer (a lower bound
  on the steps' cost no policy on these drafts can beat);
* the `auto` policy's rule replayed: Beta counts per (matched n-gram length, agreement class,
  depth) with a prior borrowed from the level above, learned online over the prompts in run
  order from the verified nodes only (as `auto`), or from every drafted node once the answer
  shows it ("hindsight");
* the same rule with counts fitted on the whole run beforehand (in-sample: optimistic).

    python3 policy_headroom.py EVAL_DIR [--sizes]

`--sizes` (session 56) adds the share of steps per draft size, of each replayed rule and of the
run itself, and the run's mean accepted tokens per draft size.
"""
import collections
import gzip
import json
import sys

K, NGRAMS, PRIOR = 10, (3, 2, 1), 2.0
SIZES = "--sizes" in sys.argv
HIST = collections.Counter()


def continuations(tokens, n):
    if len(tokens) <= n:
        return []
    suffix = tokens[-n:]
    return [s + n for s in range(len(tokens) - n) if tokens[s:s + n] == suffix]


def agreement_class(agrees, seen):
    if seen >= 2 and agrees >= seen:
        return 0
    if seen <= 1:
        return 1
    return 2 if 2 * agrees >= seen else 3


def lookup(tokens):
    """(matched n, draft, agreement class per draft token)."""
    for n in NGRAMS:
        starts = continuations(tokens, n)
        if starts:
            draft = tokens[starts[-1]:starts[-1] + K]
            live, classes = list(starts), []
            for d, t in enumerate(draft):
                live = [s for s in live if s + d < len(tokens)]
                agrees = sum(1 for s in live if tokens[s + d] == t)
                classes.append(agreement_class(agrees, len(live)))
                live = [s for s in live if tokens[s + d] == t]
            return n, draft, classes
    return 0, [], []


def percents(counter):
    total = sum(counter.values())
    return " ".join(f"{k}:{100 * v / total:.1f}" for k, v in sorted(counter.items()))


def main():
    recs = [json.loads(line) for line in gzip.open(f"{sys.argv[1]}/records.jsonl.gz", "rt")]
    ar = {r["prompt_id"]: r for r in recs if r["method"] == "ar"}
    pl = {r["prompt_id"]: r for r in recs if r["method"] == "prompt-lookup"}
    order = [r["prompt_id"] for r in recs if r["method"] == "ar"]
    ratios = collections.defaultdict(list)
    for pid, r in pl.items():
        a = ar[pid]["decode_ms"] / len(ar[pid]["output_ids"])
        for s in r["steps"]:
            ratios[s["tree_size"]].append(s["verify_ms"] / a)
    cost = {0: 1.0}
    for k in range(1, K + 1):
        v = sorted(ratios.get(k, []))
        cost[k] = v[len(v) // 2] if len(v) >= 5 else cost[k - 1] + (cost[k - 1] - cost[k - 2] if k > 1 else 0.15)
    print("verify cost by draft tokens (x an ar step, the run's medians):",
          " ".join(f"{k}:{cost[k]:.2f}" for k in range(K + 1)))
    steps_total = sum(len(ar[p]["output_ids"]) - 1 for p in order)
    # Each position's draft and how much of it the target would accept.
    rows = {}
    for pid in order:
        prompt, out = ar[pid]["prompt_ids"], ar[pid]["output_ids"]
        rows[pid] = []
        for i in range(1, len(out)):
            n, draft, classes = lookup(prompt + out[:i])
            acc = 0
            while acc < len(draft) and i + acc < len(out) and draft[acc] == out[i + acc]:
                acc += 1
            rows[pid].append((n, draft, classes, acc))

    run = sum(cost[s["tree_size"]] for r in pl.values() for s in r["steps"])
    print(f"the run's own steps: {steps_total / run:.3f}x")

    def replay(choose, learn=None):
        total = 0.0
        for pid in order:
            out_len, i = len(ar[pid]["output_ids"]), 1
            while i < out_len:
                n, draft, classes, acc = rows[pid][i - 1]
                k = choose(n, draft, classes)
                HIST[k] += 1
                if learn:
                    learn(n, draft, classes, acc, k)
                total += cost[k]
                i += min(acc, k) + 1
        return steps_total / total

    for k in (1, 2, 3, 4, 6, 10):
        print(f"fixed k = {k}: {replay(lambda n, d, c, k=k: min(k, len(d))):.3f}x")
    oracle = 0.0
    for pid in order:
        out_len, r = len(ar[pid]["output_ids"]), rows[pid]
        best = [0.0] * (out_len + 1)
        for i in range(out_len - 1, 0, -1):
            best[i] = min(cost[k] + best[min(out_len, i + k + 1)] for k in range(r[i - 1][3] + 1))
        oracle += best[1]
    print(f"oracle (knows each draft's accepted length): {steps_total / oracle:.3f}x")

    def policy(counts):
        def p(n, cls, d):
            prior = 0.5 if d == 0 else p(n, cls, d - 1)
            a, t = counts[(n, cls, d)]
            return (a + PRIOR * prior) / (t + PRIOR)

        def choose(n, draft, classes):
            best, best_rate, gain, path = 0, 1.0 / cost[0], 1.0, 1.0
            for d in range(len(draft)):
                path *= p(n, classes[d], min(d, 15))
                gain += path
                if gain / cost[d + 1] > best_rate:
                    best, best_rate = d + 1, gain / cost[d + 1]
            return best
        return choose

    def learner(counts, hindsight):
        def learn(n, draft, classes, acc, k):
            for d in range(min(len(draft) if hindsight else k, acc + 1)):
                c = counts[(n, classes[d], min(d, 15))]
                c[1] += 1
                c[0] += d < acc
        return learn

    for name, hindsight in (("auto's rule, online, verified nodes", False), ("auto's rule, online, hindsight", True)):
        counts = collections.defaultdict(lambda: [0.0, 0.0])
        HIST.clear()
        print(f"{name}: {replay(policy(counts), learner(counts, hindsight)):.3f}x")
        if SIZES:
            print("  replayed draft sizes, % of steps:", percents(HIST))
    if SIZES:
        own = collections.Counter(s["tree_size"] for r in pl.values() for s in r["steps"])
        print("  the run's draft sizes, % of steps:", percents(own))
        acc = collections.defaultdict(list)
        for r in pl.values():
            for s in r["steps"]:
                acc[s["tree_size"]].append(s["accepted"])
        print("  the run's mean accepted per draft size:",
              " ".join(f"{k}:{sum(v) / len(v):.2f}" for k, v in sorted(acc.items())))
    counts = collections.defaultdict(lambda: [0.0, 0.0])
    fit = learner(counts, True)
    for pid in order:
        for n, draft, classes, acc in rows[pid]:
            fit(n, draft, classes, acc, len(draft))
    print(f"auto's rule, counts fitted on the whole run (in-sample): {replay(policy(counts)):.3f}x")


if __name__ == "__main__":
    main()
