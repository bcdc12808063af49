#!/usr/bin/env python3
"""Compares draft policies without the host's noise: prices every step of several eval runs at
the same costs.

Each run directory holds an `eval` run's `records.jsonl` (or `records.jsonl.gz`). Every step of
METHOD in every run is priced at the pooled median verify time of its pass size (over all the
runs given) plus the pooled median drafting time per drafter call × its calls; the "priced
speedup" of a run is its tokens × the pooled plain-step time ÷ that price. What differs between
runs is then only what the policy chose (how much it drafted, how many calls, how many tokens it
got), not how loud the machine was while each run was timed.

usage: scripts/policy_priced.py [--method redrafter] RUN_DIR...
"""

import argparse
import collections
import json

from eval_records import median, records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", default="redrafter")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    steps_of, verify, per_call = {}, collections.defaultdict(list), []
    for run in args.runs:
        steps = []
        for line in records(run):
            r = json.loads(line)
            if r["method"] != args.method:
                continue
            for s in r["steps"]:
                steps.append(s)
                verify[s["tree_size"]].append(s["verify_ms"])
                if s["draft_calls"] > 0:
                    per_call.append(s["draft_ms"] / s["draft_calls"])
        steps_of[run] = steps
    # Sizes seen fewer than 20 times are priced like the largest well-measured one.
    cost = {n: median(v) for n, v in verify.items() if len(v) >= 20}
    call = median(per_call) if per_call else 0.0
    plain = cost[0]
    print(f"pooled verify ms by draft size: { {n: round(v, 2) for n, v in sorted(cost.items())} }; per call {call:.3f} ms")
    for run, steps in steps_of.items():
        tokens = sum(s["emitted"] for s in steps)
        price = sum(cost.get(s["tree_size"], cost[max(cost)]) + call * s["draft_calls"] for s in steps)
        calls = sum(s["draft_calls"] for s in steps)
        empty = sum(1 for s in steps if s["tree_size"] == 0)
        print(
            f"{run}: priced speedup {tokens * plain / price:.3f}, tokens/step {tokens / len(steps):.3f}, "
            f"calls/step {calls / len(steps):.2f}, steps verifying no draft {100 * empty / len(steps):.1f} %"
        )


if __name__ == "__main__":
    main()
