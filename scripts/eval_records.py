"""Shared helpers of the scripts that read an `eval` run's records (`policy_priced.py`,
`verify_by_context.py`)."""

import gzip
import os


def records(run):
    """The lines of RUN's `records.jsonl`, or of its gzipped copy `records.jsonl.gz`."""
    path = os.path.join(run, "records.jsonl")
    if os.path.exists(path):
        return open(path)
    return gzip.open(path + ".gz", "rt")


def median(values):
    """The upper median (the middle value of an odd count)."""
    values = sorted(values)
    return values[len(values) // 2]
