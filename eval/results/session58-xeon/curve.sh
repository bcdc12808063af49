#!/usr/bin/env bash
# The verify cost curve, the binary before (`f7e6707`, small sizes timed right after the large
# ones) and after `0ba7e87` (each pass after 8 ms of one-token steps), alternating, two rounds:
#     bash eval/results/session58-xeon/curve.sh OLD_BIN NEW_BIN > eval/results/session58-xeon/curve-ab.txt
set -euo pipefail
for round in 1 2; do
    for bin in "$1" "$2"; do
        echo "== round $round: $bin"
        "$bin" bench ar --prompts 1 --max-new-tokens 16 --contexts 64,512 --curve-runs 20 --tree-size 2 --json 2>/dev/null |
            tail -1 | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
m = d["machine"]
print("cpu:", m["cpu_model"], "| kernels:", m["kernel_path"], "| flags:", " ".join(m["cpu_flags"]))
print("ar ms/token %.3f" % d["ms_per_token"])
for shape in ("chain", "tree"):
    for ctx in sorted({c["context"] for c in d["verify_curve"]}):
        pts = [c for c in d["verify_curve"] if c["shape"] == shape and c["context"] == ctx]
        print(shape, ctx, "t(1) %.2f ms |" % pts[0]["ms"], " ".join("%d:%.2f" % (c["n"], c["over_step1"]) for c in pts))
'
    done
done
