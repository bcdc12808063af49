"""Compares the online and cached demo runs of run.sh: validation metrics, weights, times."""
import hashlib
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
# The training runs' own summaries (run.sh copies them before the reruns rewrite summary.json).
runs = {name: json.loads((out / f"{name}-summary.json").read_text()) for name in ("online", "cached")}
digest = {name: hashlib.sha256((out / name / "drafter.safetensors").read_bytes()).hexdigest() for name in runs}
print(f"{'':24} {'online':>24} {'cached':>24}")
for key in ("steps", "hidden_source", "hidden_seconds", "epoch_seconds", "val_loss", "val_top1", "val_top5"):
    cells = []
    for name in runs:
        v = runs[name].get(key)
        if isinstance(v, float):
            v = f"{v:.1f}" if key.endswith("seconds") else f"{v:.6f}"
        elif isinstance(v, list):
            v = "/".join(f"{x:.1f}" if key.endswith("seconds") else f"{x:.4f}" for x in v)
        elif key == "hidden_source" and v != "online":
            v = "cache"
        cells.append(str(v))
    print(f"{key:24} {cells[0]:>24} {cells[1]:>24}")
print(f"{'drafter sha256':24} {digest['online'][:24]:>24} {digest['cached'][:24]:>24}")
same = all(runs["online"][k] == runs["cached"][k] for k in ("val_loss", "val_top1", "val_top5"))
print("validation metrics identical:", same, "| drafters identical:", digest["online"] == digest["cached"])
