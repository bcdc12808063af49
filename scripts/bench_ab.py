#!/usr/bin/env python3
"""Interleaved A/B of `draftsmith bench ar` verify-cost points for two or more binaries.

On a shared (noisy) machine, figures of two engines are only comparable when they are measured
side by side: this runs the binaries in turn, `--reps` times, each a short `bench ar --json` at
one cached context, and prints per binary and size the minimum and median of the pass time and
of its attention and matrix parts (chains only).

    python3 scripts/bench_ab.py OLD_BINARY NEW_BINARY --context 2048 --sizes 1,2,4,8 --reps 4
"""
import argparse
import collections
import json
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--context", default="64")
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    points = collections.defaultdict(list)
    for _ in range(args.reps):
        for binary in args.binaries:
            cmd = [binary, "bench", "ar", "--model", args.model, "--contexts", args.context, "--prompts", "1",
                   "--max-new-tokens", "2", "--curve-sizes", args.sizes, "--curve-runs", "5", "--tree-size", "1",
                   "--json"]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            for p in result["verify_curve"]:
                if p["shape"] == "chain":
                    points[(binary, p["context"], p["n"])].append((p["ms"], p["attention_ms"], p["matrices_ms"]))
    print("| binary | context | n | ms min | ms median | attention min | attention median | matrices min |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted(points, key=lambda k: (args.binaries.index(k[0]), k[1], k[2])):
        ms, attn, mat = (sorted(v[i] for v in points[key]) for i in range(3))
        mid = len(ms) // 2
        print(f"| `{key[0]}` | {key[1]} | {key[2]} | {ms[0]:.2f} | {ms[mid]:.2f} | {attn[0]:.2f} | {attn[mid]:.2f} | {mat[0]:.2f} |")


if __name__ == "__main__":
    main()
