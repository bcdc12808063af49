#!/usr/bin/env python3
"""The verify cost t(n)/t(1) of every recorded `bench ar --json` run beside its own roofline.

Each `bench ar` run measures, in the same minute as its curve, the machine's read bandwidth for a
model-sized buffer and the int8 kernel's peak multiply-add rate; its roofline for a pass over n
tokens is max(weight bytes / bandwidth, n * multiply-adds / kernel peak), so the roofline's
t(n)/t(1) is what that machine allowed in that minute. This prints, for one model and cached
context, each run's measured ratio (chain / tree) next to the roofline's, and the lower of the
two over the roofline's (1.00: the engine sat on the roofline; below 1: the bandwidth probe read
faster than the model's own weight stream). Runs without a roofline (the dense and GPU paths) are skipped.

usage: scripts/roofline_table.py [--model SmolLM2] [--context 64] [--n 8] [PATH...]
       (PATH: JSON files or folders to search; default eval/results)
"""

import argparse
import json
import os


def runs(paths):
    """(path, result) of every `bench ar --json` result with a verify curve under `paths`."""
    for root in paths:
        files = [root] if os.path.isfile(root) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".json"))
        for path in files:
            try:
                text = open(path).read().strip()
            except OSError:
                continue
            try:
                result = json.loads(text)
            except ValueError:
                # A saved console: `bench ar` prints its report first, the JSON result last.
                try:
                    result = json.loads(text.splitlines()[-1])
                except (ValueError, IndexError):
                    continue
            if isinstance(result, dict) and result.get("verify_curve"):
                yield path, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["eval/results"])
    ap.add_argument("--model", default="SmolLM2", help="a substring of the model's path")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    args = ap.parse_args()
    print(f"| run | CPU | kernels | GB/s | kernel GMAC/s | t(1) ms | t({args.n})/t(1) chain / tree "
          f"| roofline | lower of chain / tree over roofline |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for path, r in runs(args.paths):
        if args.model.lower() not in str(r.get("model", "")).lower():
            continue
        m = r.get("machine", {})
        point = {(p["shape"], p["n"]): p for p in r["verify_curve"] if p.get("context") == args.context}
        chain, tree, one = point.get(("chain", args.n)), point.get(("tree", args.n)), point.get(("chain", 1))
        if not chain or not one or not chain.get("roofline_over_step1"):
            continue
        roof = chain["roofline_over_step1"]
        shapes = " / ".join(f"{p['over_step1']:.2f}" if p else "–" for p in (chain, tree))
        best = min(p["over_step1"] for p in (chain, tree) if p)
        print(f"| `{os.path.relpath(path)}` | {m.get('cpu_model', '?')} | {m.get('kernel_path', '?')} "
              f"| {m.get('read_bandwidth_gb_s', 0):.0f} | {m.get('kernel_peak_gmac_s', 0):.0f} | {one['ms']:.2f} "
              f"| {shapes} | {roof:.2f} | {best / roof:.2f} |")


if __name__ == "__main__":
    main()
