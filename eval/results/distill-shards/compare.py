#!/usr/bin/env python3
"""Reads a single-process distilled dataset and a sharded one (part-*-of-*/ directories) with
pyarrow alone — not with draftsmith's reader — and checks that the parts, concatenated in part
order, hold the same records as the single process, column for column."""
import json
import pathlib
import sys

import pyarrow.parquet as pq


def records(d: pathlib.Path):
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["complete"], f"{d}: not complete"
    tables = [pq.read_table(d / s["file"]) for s in manifest["shards"]]
    rows = [r for t in tables for r in t.to_pylist()]
    return manifest, rows


single_dir, parts_dir = map(pathlib.Path, sys.argv[1:3])
_, single = records(single_dir)
parts = sorted(parts_dir.glob("part-*-of-*"))
merged = []
for p in parts:
    manifest, rows = records(p)
    print(f"{p.name}: {len(rows)} records, part {manifest.get('part')}")
    merged += rows
print(f"single: {len(single)} records; parts merged: {len(merged)} records")
columns = sorted(single[0].keys()) if single else []
same = single == merged
print(f"columns compared: {', '.join(columns)}")
tokens = sum(len(r.get("tokens") or []) for r in single)
print(f"tokens in all records: {tokens}")
print("merged == single, record for record:", "yes" if same else "NO")
sys.exit(0 if same else 1)
