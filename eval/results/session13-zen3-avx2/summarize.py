"""Tables of run.sh's output: verify cost per binary (median of the rounds) and the evals."""
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
benches = {v: [json.loads(p.read_text()) for p in sorted(out.glob(f"bench-{v}-*.json"))] for v in ("old", "new")}
m = benches["new"][0]["machine"]
print(f"machine: {m['cpu_model']}, {m['threads']} threads, flags {' '.join(m['cpu_flags'])}, kernel path {m['kernel_path']}")
print()
print("| binary | decode tok/s (rounds) | 1-token step ms |")
print("|---|---|---|")
for v, runs in benches.items():
    toks = " / ".join(f"{r['decode_tokens_per_s']:.1f}" for r in runs)
    steps = " / ".join(f"{r['step1_ms']:.2f}" for r in runs)
    print(f"| {v} | {toks} | {steps} |")
print()
print("Verify cost t(n)/t(1), chains, median over rounds (ms of t(n) in brackets):")
print()
for ctx in (64, 2048):
    sizes = sorted({p["n"] for p in benches["new"][0]["verify_curve"] if p["context"] == ctx})
    print(f"context {ctx}:")
    print()
    print("| binary | " + " | ".join(f"n={n}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for v, runs in benches.items():
        cells = []
        for n in sizes:
            pts = [p for r in runs for p in r["verify_curve"] if p["context"] == ctx and p["n"] == n and p["shape"] == "chain"]
            ratio = statistics.median(p["over_step1"] for p in pts)
            ms = statistics.median(p["ms"] for p in pts)
            cells.append(f"{ratio:.2f} ({ms:.1f})")
        print(f"| {v} | " + " | ".join(cells) + " |")
    print()


def eval_rows(run: str, method: str, label: str) -> None:
    """One table row per binary: `ar` and `method` of `eval-{binary}-{run}`."""
    for v in ("old", "new"):
        s = json.loads((out / f"eval-{v}-{run}" / "summary.json").read_text())
        ar, m = s["methods"]["ar"], s["methods"][method]
        print(
            f"| {v} | {label} | {ar['decode_ms_per_token']:.2f} | {m['decode_ms_per_token']:.2f} | "
            f"{m['tokens_per_step']:.3f} | {m['mean_draft_ms']:.3f} | {m['mean_verify_ms']:.2f} | "
            f"{m['speedup']:.2f} | {m['lossless']} |"
        )


print("| eval | method, policy | ar ms/token | method ms/token | τ | draft ms/step | verify ms/step | speedup | lossless |")
print("|---|---|---|---|---|---|---|---|---|")
for policy in ("fixed", "auto"):
    eval_rows(policy, "redrafter", f"redrafter, {policy}")
eval_rows("lookup", "prompt-lookup", "prompt-lookup, auto")
