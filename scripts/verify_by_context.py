#!/usr/bin/env python3
"""What a verify pass cost inside decoding, by cached length and draft size.

Reads an `eval` run's `records.jsonl` (or `records.jsonl.gz`) and prints, for METHOD, the median
verify ms of its steps per bin of cached tokens (prompt + tokens so far) and per draft size
(0 = a plain step, n = a pass over n + 1 tokens), with how many steps each median is over. The
last column is what one draft token added to a plain step at that length: the number that
`bench ar --contexts ... --curve-sizes 1,2` measures on an idle pass, here as decoding paid it.

usage: scripts/verify_by_context.py [--method redrafter] [--bin 64] [--max-size 3] RUN_DIR...
"""

import argparse
import collections
import json

from eval_records import median, records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", default="redrafter")
    ap.add_argument("--bin", type=int, default=64, help="cached tokens per bin")
    ap.add_argument("--max-size", type=int, default=3, help="largest draft size shown")
    ap.add_argument("--min-steps", type=int, default=20, help="fewer steps than this print as -")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    for run in args.runs:
        times = collections.defaultdict(list)
        for line in records(run):
            r = json.loads(line)
            if r["method"] != args.method:
                continue
            cached = len(r["prompt_ids"])
            for s in r["steps"]:
                if s["tree_size"] <= args.max_size:
                    times[(cached // args.bin * args.bin, s["tree_size"])].append(s["verify_ms"])
                cached += s["emitted"]
        sizes = list(range(args.max_size + 1))
        print(f"{run} ({args.method}): median verify ms [steps] by cached tokens and draft size")
        print("| cached | " + " | ".join(f"size {n}" for n in sizes) + " | size 1 − size 0 |")
        print("|---|" + "---|" * (len(sizes) + 1))
        for b in sorted({k[0] for k in times}):
            cells, med = [], {}
            for n in sizes:
                v = times.get((b, n), [])
                if len(v) >= args.min_steps:
                    med[n] = median(v)
                    cells.append(f"{med[n]:.2f} [{len(v)}]")
                else:
                    cells.append("-")
            extra = f"{med[1] - med[0]:+.2f}" if 0 in med and 1 in med else "-"
            print(f"| {b}–{b + args.bin - 1} | " + " | ".join(cells) + f" | {extra} |")
        print()


if __name__ == "__main__":
    main()
