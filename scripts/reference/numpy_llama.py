#!/usr/bin/env python3
"""Independent numpy reference forward pass for Llama / Qwen2 GGUF models.

What it is
    A deliberately simple, unoptimised numpy implementation of the decoder
    forward pass, reading weights straight out of a GGUF file.  It exists so
    the Rust/burn engine in draftsmith can be checked against something that
    was written independently of it.

Conventions (llama.cpp's, followed *directly*)
    * Weights are dequantised with ``gguf.quants.dequantize`` (exact decode of
      every GGML block format that gguf-py knows), then all math is done in
      float64 (``DTYPE`` below).  llama.cpp itself quantises activations to
      Q8 for quantised mat-muls, so llama.cpp will differ from this reference
      by quantisation noise; the reference is "exact math on the dequantised
      weights".
    * A GGUF matrix with ggml shape ``[ne0, ne1]`` is a numpy array of shape
      ``[ne1, ne0]`` = ``[out_features, in_features]``; ``y = x @ W.T``.
    * arch ``llama``: ``convert_hf_to_gguf.py`` stored attn_q / attn_k rows
      permuted, and llama.cpp applies *normal* RoPE (``LLAMA_ROPE_TYPE_NORM``)
      that rotates ADJACENT pairs ``(x[2i], x[2i+1])`` of each head.  We do
      exactly that and do NOT un-permute.
    * arch ``qwen2``: weights are not permuted and llama.cpp applies NEOX RoPE
      (``LLAMA_ROPE_TYPE_NEOX``) rotating split halves ``(x[i], x[i+d/2])``.
      q/k/v projections have biases (``attn_{q,k,v}.bias``).
    * RoPE angle for pair i at position p: ``p * freq_scale * base**(-2i/n_rot)``
      (divided by ``rope_freqs[i]`` when a ``rope_freqs.weight`` tensor exists);
      ``freq_scale = 1/factor`` for linear rope scaling; YaRN is not supported
      (raises).  Dims past ``n_rot`` (``{arch}.rope.dimension_count``) pass
      through unrotated.
    * RMSNorm: ``x / sqrt(mean(x^2) + eps) * w``.
    * Attention: causal, scale ``1/sqrt(head_dim)``, grouped-query: query head
      h reads KV head ``h // (n_head // n_head_kv)`` (ggml's broadcast rule).
    * MLP: ``ffn_down(silu(ffn_gate(x)) * ffn_up(x))``.
    * Output head: ``output.weight``; tied to ``token_embd.weight`` when absent.

Usage
    As a library::

        from numpy_llama import GGUFModel
        m = GGUFModel("model.gguf")
        logits = m.forward([1, 2, 3])        # float64 [3, vocab]

    From the shell (prints the top-5 next tokens after a list of token ids)::

        python3 scripts/reference/numpy_llama.py --model M.gguf --tokens 1,2,3

    Requirements: ``pip install gguf numpy``.  This file produces no outputs by
    itself; make_golden.py and make_tiny_models.py use it.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import gguf
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize

DTYPE = np.float64

SUPPORTED_ARCHS = ("llama", "qwen2")


def field_value(field):
    """Python value of a GGUF metadata field (scalar, str, or list)."""
    return field.contents()


def load_tensor(t) -> np.ndarray:
    """Dequantise one GGUF tensor to a float numpy array in numpy (row-major) shape."""
    shape = tuple(int(x) for x in reversed(t.shape))  # ggml ne -> numpy order
    qtype = GGMLQuantizationType(int(t.tensor_type))
    arr = dequantize(t.data, qtype)
    return np.asarray(arr, dtype=np.float32).reshape(shape)


class GGUFModel:
    """Weights + hyper-parameters of a llama/qwen2 GGUF, and a plain forward()."""

    def __init__(self, path: str, dtype=DTYPE):
        self.path = path
        self.dtype = dtype
        reader = GGUFReader(path)
        self.meta = {}
        for name, field in reader.fields.items():
            if name.startswith("GGUF."):
                continue
            self.meta[name] = field_value(field)

        arch = self.meta["general.architecture"]
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"unsupported architecture {arch!r}")
        self.arch = arch
        m = self.meta
        a = arch + "."
        self.n_layer = int(m[a + "block_count"])
        self.n_embd = int(m[a + "embedding_length"])
        self.n_ff = int(m[a + "feed_forward_length"])
        self.n_head = int(m[a + "attention.head_count"])
        self.n_head_kv = int(m.get(a + "attention.head_count_kv", self.n_head))
        self.eps = float(m[a + "attention.layer_norm_rms_epsilon"])
        self.rope_base = float(m.get(a + "rope.freq_base", 10000.0))
        self.n_ctx_train = int(m.get(a + "context_length", 0))
        self.head_dim = int(m.get(a + "attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(m.get(a + "rope.dimension_count", self.head_dim))
        assert self.n_head % self.n_head_kv == 0
        assert self.n_rot % 2 == 0 and self.n_rot <= self.head_dim

        # optional rope scaling (llama.cpp: freq_scale = 1/factor)
        scaling_type = m.get(a + "rope.scaling.type", "none")
        factor = float(m.get(a + "rope.scaling.factor", 0.0) or 0.0)
        if scaling_type in ("none", None) or factor in (0.0, 1.0):
            self.freq_scale = 1.0
        elif scaling_type == "linear":
            self.freq_scale = 1.0 / factor
        else:
            raise NotImplementedError(f"rope scaling {scaling_type!r} not implemented")
        # llama.cpp LLAMA_ROPE_TYPE_NORM for llama, NEOX for qwen2
        self.rope_neox = arch == "qwen2"

        raw = {t.name: t for t in reader.tensors}

        def get(name, required=True):
            if name not in raw:
                if required:
                    raise KeyError(f"tensor {name} missing from {path}")
                return None
            return load_tensor(raw[name]).astype(dtype)

        self.tok_embd = get("token_embd.weight")  # [vocab, n_embd]
        self.vocab_size = self.tok_embd.shape[0]
        out = get("output.weight", required=False)
        self.tied_embeddings = out is None
        self.output = self.tok_embd if out is None else out
        self.output_norm = get("output_norm.weight")
        self.rope_freqs = get("rope_freqs.weight", required=False)
        self.layers = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            L = {
                "attn_norm": get(p + "attn_norm.weight"),
                "wq": get(p + "attn_q.weight"),
                "wk": get(p + "attn_k.weight"),
                "wv": get(p + "attn_v.weight"),
                "wo": get(p + "attn_output.weight"),
                "bq": get(p + "attn_q.bias", required=False),
                "bk": get(p + "attn_k.bias", required=False),
                "bv": get(p + "attn_v.bias", required=False),
                "ffn_norm": get(p + "ffn_norm.weight"),
                "w_gate": get(p + "ffn_gate.weight"),
                "w_up": get(p + "ffn_up.weight"),
                "w_down": get(p + "ffn_down.weight"),
            }
            if arch == "qwen2":
                assert L["bq"] is not None and L["bk"] is not None and L["bv"] is not None
            self.layers.append(L)
        del raw, reader

    # ------------------------------------------------------------------ ops
    def rms_norm(self, x, w):
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.eps) * w

    def rope_angles(self, n_pos):
        """theta[p, i] for positions 0..n_pos-1 and pairs i < n_rot/2."""
        i = np.arange(self.n_rot // 2, dtype=np.float64)
        inv_freq = self.rope_base ** (-2.0 * i / self.n_rot)
        if self.rope_freqs is not None:
            inv_freq = inv_freq / self.rope_freqs.astype(np.float64)[: self.n_rot // 2]
        pos = np.arange(n_pos, dtype=np.float64) * self.freq_scale
        return np.outer(pos, inv_freq)  # [T, n_rot/2]

    def apply_rope(self, x, cos, sin):
        """x: [T, heads, head_dim]; cos/sin: [T, n_rot/2]."""
        c = cos[:, None, :].astype(x.dtype)
        s = sin[:, None, :].astype(x.dtype)
        out = x.copy()
        if self.rope_neox:  # split halves: (x[i], x[i + n_rot/2])
            h = self.n_rot // 2
            x0 = x[..., :h]
            x1 = x[..., h : self.n_rot]
            out[..., :h] = x0 * c - x1 * s
            out[..., h : self.n_rot] = x0 * s + x1 * c
        else:  # "normal": adjacent pairs (x[2i], x[2i+1])
            x0 = x[..., 0 : self.n_rot : 2]
            x1 = x[..., 1 : self.n_rot : 2]
            out[..., 0 : self.n_rot : 2] = x0 * c - x1 * s
            out[..., 1 : self.n_rot : 2] = x0 * s + x1 * c
        return out

    @staticmethod
    def silu(x):
        return x / (1.0 + np.exp(-x))

    def attention(self, L, h, cos, sin, mask, kv=None):
        """Causal GQA self-attention.  kv: optional per-layer cache dict with
        "k"/"v" arrays [S, n_head_kv, head_dim] of earlier positions (RoPE'd)."""
        T = h.shape[0]
        hd, nh, nkv = self.head_dim, self.n_head, self.n_head_kv
        q = h @ L["wq"].T
        k = h @ L["wk"].T
        v = h @ L["wv"].T
        if L["bq"] is not None:
            q = q + L["bq"]
        if L["bk"] is not None:
            k = k + L["bk"]
        if L["bv"] is not None:
            v = v + L["bv"]
        q = self.apply_rope(q.reshape(T, nh, hd), cos, sin)
        k = self.apply_rope(k.reshape(T, nkv, hd), cos, sin)
        v = v.reshape(T, nkv, hd)
        if kv is not None:
            if "k" in kv:
                k = np.concatenate([kv["k"], k], axis=0)
                v = np.concatenate([kv["v"], v], axis=0)
            kv["k"], kv["v"] = k, v
        group = nh // nkv
        qg = q.reshape(T, nkv, group, hd)  # query head h = kv*group + g
        scores = np.einsum("tkgd,skd->kgts", qg, k) / math.sqrt(hd)
        scores = np.where(mask, -np.inf, scores)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p = p / p.sum(axis=-1, keepdims=True)
        o = np.einsum("kgts,skd->tkgd", p, v).reshape(T, nh * hd)
        return o @ L["wo"].T

    def forward(self, tokens, last_only: bool = False, cache=None) -> np.ndarray:
        """Logits [len(tokens), vocab] (or [1, vocab] with last_only) in self.dtype.

        cache: None for a plain full forward, or a dict (start with {}) that is
        extended in place with the keys/values of these tokens, which are then
        at positions cache["n"] .. cache["n"] + len(tokens) - 1."""
        tokens = np.asarray(tokens, dtype=np.int64)
        assert tokens.ndim == 1 and len(tokens) > 0
        T = len(tokens)
        p0 = 0 if cache is None else cache.get("n", 0)
        x = self.tok_embd[tokens].copy()
        theta = self.rope_angles(p0 + T)[p0:]
        cos, sin = np.cos(theta), np.sin(theta)
        # query i (position p0+i) may attend key j (position j) iff j <= p0+i
        mask = np.arange(p0 + T)[None, :] > (p0 + np.arange(T))[:, None]  # True = masked
        if cache is not None and "layers" not in cache:
            cache["layers"] = [{} for _ in self.layers]
        for li, L in enumerate(self.layers):
            kv = None if cache is None else cache["layers"][li]
            x = x + self.attention(L, self.rms_norm(x, L["attn_norm"]), cos, sin, mask, kv)
            h = self.rms_norm(x, L["ffn_norm"])
            x = x + (self.silu(h @ L["w_gate"].T) * (h @ L["w_up"].T)) @ L["w_down"].T
        if cache is not None:
            cache["n"] = p0 + T
        if last_only:
            x = x[-1:]
        x = self.rms_norm(x, self.output_norm)
        return x @ self.output.T

    def greedy(self, tokens, n_new: int, use_cache: bool = True):
        """Greedy continuation.  With use_cache the prompt is run once and each
        new token is fed alone against a KV cache (same math as recomputing the
        whole sequence, up to float64 rounding); use_cache=False recomputes.

        Returns (new_ids, margins) where margins[i] = top1 - top2 logit of the
        distribution that produced new_ids[i]."""
        seq = [int(t) for t in tokens]
        cache = {} if use_cache else None
        new_ids, margins = [], []
        feed = seq
        for _ in range(n_new):
            logits = self.forward(feed, last_only=True, cache=cache)[0]
            top2 = np.argsort(-logits, kind="stable")[:2]
            new_ids.append(int(top2[0]))
            margins.append(float(logits[top2[0]] - logits[top2[1]]))
            seq.append(int(top2[0]))
            feed = [int(top2[0])] if use_cache else seq
        return new_ids, margins


def topk(logits: np.ndarray, k: int):
    """(ids, values) of the k largest logits; ties broken by lower id."""
    ids = np.argsort(-logits, kind="stable")[:k]
    return [int(i) for i in ids], [float(logits[i]) for i in ids]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    args = ap.parse_args(argv)
    m = GGUFModel(args.model)
    toks = [int(t) for t in args.tokens.split(",")]
    logits = m.forward(toks, last_only=True)[0]
    ids, vals = topk(logits, 5)
    print(f"arch={m.arch} layers={m.n_layer} embd={m.n_embd} heads={m.n_head}/{m.n_head_kv} "
          f"vocab={m.vocab_size} tied={m.tied_embeddings}")
    for i, v in zip(ids, vals):
        print(f"{i}\t{v:.6f}")


if __name__ == "__main__":
    sys.exit(main())
