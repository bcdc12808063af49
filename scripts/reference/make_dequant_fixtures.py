#!/usr/bin/env python3
"""Writes dequantization reference fixtures for crates/draftsmith-gguf.

For every ggml type the crate supports, builds a few deterministic random blocks (numpy seed
below; scale fields are overwritten with sane finite f16 values so that no NaN/Inf appears),
dequantizes them with gguf-py's reference `gguf.quants.dequantize`, and writes

    crates/draftsmith-gguf/tests/fixtures/dequant_<type>.bin   raw block bytes
    crates/draftsmith-gguf/tests/fixtures/dequant_<type>.json  {"type", "type_id", "n_elements",
                                                                "seed", "gguf_version",
                                                                "expected_bits": [u32 ...]}

`expected_bits` are the f32 results' IEEE bit patterns, so the Rust tests compare bit for bit.

Usage (offline, from the repository root):
    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf numpy
    /tmp/gguf-venv/bin/python scripts/reference/make_dequant_fixtures.py
"""

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize

SEED = 20240611
OUT = Path(__file__).resolve().parents[2] / "crates/draftsmith-gguf/tests/fixtures"

# Byte offsets of the f16 scale fields inside one block, per type.
F16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
# Number of blocks per fixture (block = 32 values, or 256 for K-quants; 1 value for floats).
N_BLOCKS = {T.F32: 96, T.F16: 96, T.BF16: 96, T.Q4_0: 5, T.Q4_1: 5, T.Q5_0: 5, T.Q5_1: 5,
            T.Q8_0: 5, T.Q4_K: 3, T.Q5_K: 3, T.Q6_K: 3}


def sane_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite f16 values spanning several magnitudes and both signs (incl. a zero)."""
    mags = 10.0 ** rng.uniform(-4, 0.5, size=n)
    signs = rng.choice([-1.0, 1.0], size=n)
    vals = (mags * signs).astype(np.float16)
    vals[0] = np.float16(0.0) if n > 2 else vals[0]
    return vals


def float_blocks(rng: np.random.Generator, qtype: T, n: int) -> np.ndarray:
    """Raw bytes of n finite float values of the given float type."""
    x = (rng.standard_normal(n) * 3.0).astype(np.float32)
    x[:4] = [0.0, -0.0, 1e-40, -65504.0]  # zero, negative zero, subnormal, large
    if qtype == T.F32:
        return x.view(np.uint8)
    if qtype == T.F16:
        x[2] = 3e-6  # an f16 subnormal
        return x.astype(np.float16).view(np.uint8)
    bits = x.view(np.uint32) >> 16  # BF16: truncated f32 top halves (all finite here)
    return bits.astype(np.uint16).view(np.uint8)


def quant_blocks(rng: np.random.Generator, qtype: T, n_blocks: int) -> np.ndarray:
    """Random block bytes with the f16 scale fields replaced by sane values."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        blocks[:, off:off + 2] = sane_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def main() -> None:
    rng = np.random.default_rng(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    for qtype, n_blocks in N_BLOCKS.items():
        block_size, _ = GGML_QUANT_SIZES[qtype]
        if qtype in F16_FIELDS:
            raw = quant_blocks(rng, qtype, n_blocks)
        else:
            raw = float_blocks(rng, qtype, n_blocks)
        expected = np.asarray(dequantize(raw, qtype), dtype=np.float32).reshape(-1)
        assert expected.size == n_blocks * block_size, (qtype.name, expected.size)
        assert np.isfinite(expected).all(), qtype.name
        name = qtype.name.lower()
        (OUT / f"dequant_{name}.bin").write_bytes(raw.tobytes())
        meta = {
            "type": qtype.name,
            "type_id": int(qtype),
            "n_elements": int(expected.size),
            "seed": SEED,
            "gguf_version": version("gguf"),
            "expected_bits": [int(b) for b in expected.view(np.uint32)],
        }
        (OUT / f"dequant_{name}.json").write_text(json.dumps(meta) + "\n")
        print(f"{qtype.name}: {expected.size} values, {raw.size} bytes")


if __name__ == "__main__":
    main()
