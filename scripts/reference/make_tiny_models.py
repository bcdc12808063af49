#!/usr/bin/env python3
"""Tiny deterministic Llama / Qwen2 test models, as HF directories and as GGUF.

Makes, under tests/fixtures/ (for ARCH in llama, qwen2):
    tiny-ARCH/config.json            HF config (LlamaForCausalLM / Qwen2ForCausalLM)
    tiny-ARCH/model.safetensors      HF tensor names; F32 (llama) / BF16 (qwen2)
    tiny-ARCH/tokenizer.json         byte-level BPE: 256 byte tokens + 41 merges
                                     + <|endoftext|> <|im_start|> <|im_end|> (vocab 300)
    tiny-ARCH/tokenizer_config.json  incl. a ChatML chat_template
    tiny-ARCH.gguf                   the SAME weights, converted the way llama.cpp's
                                     convert_hf_to_gguf.py does (llama: q/k rows permuted)
    tiny-ARCH.reference.json         logits at every position for 3 token sequences
                                     (lengths 1, 7, 20): "logits_gguf" from
                                     numpy_llama.py on the GGUF (llama.cpp RoPE
                                     conventions) and "logits_hf" from an HF-convention
                                     numpy forward on the safetensors (rotate-half RoPE,
                                     unpermuted); plus tokenizer test cases.

Model: hidden 16, 2 layers, 4 heads, 2 KV heads (GQA), head_dim 4,
intermediate 32, rms eps 1e-5, rope theta 10000, 256 positions.
llama: tied embeddings (no lm_head / output.weight). qwen2: q/k/v biases and
an untied lm_head.

Exactness: every weight is an integer in [-127, 127] times a power of two
(norm weights: multiples of 1/64 near 1), and each 32-wide block of a Q8_0
tensor contains a +-127, so the values are represented *exactly* in F32, F16,
BF16 and Q8_0.  The GGUF and the safetensors therefore hold identical numbers
and both forwards (float64) must agree to rounding error; the script asserts
agreement to 1e-5 (actually ~1e-15), which validates the q/k permutation +
adjacent-pair RoPE against unpermuted + rotate-half RoPE.  It also asserts the
GGUF-embedded vocab and the HF tokenizer.json tokenise the test texts alike.

GGUF tensor types: llama: matrices F16, ffn_down Q8_0 (its rows are 32 wide),
norms F32.  qwen2: token_embd F16, ffn_down Q8_0, other matrices, biases and
norms F32.

Regenerate (from the repository root; needs ``pip install gguf numpy
safetensors tokenizers``; a few seconds; output is byte-for-byte deterministic):

    python3 scripts/reference/make_tiny_models.py --out tests/fixtures
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize
from tokenizers import Tokenizer, normalizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_tokenizer import bytes_to_unicode, make_tokenizer  # noqa: E402
from numpy_llama import GGUFModel  # noqa: E402

HIDDEN = 16
N_LAYERS = 2
N_HEADS = 4
N_KV_HEADS = 2
HEAD_DIM = HIDDEN // N_HEADS  # 4
INTERMEDIATE = 32
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
MAX_POS = 256

SEEDS = {"llama": 20240601, "qwen2": 20240602}

# 41 merges of common English pairs ("Ġ" = space, "ĉ" = tab in the GPT-2 byte
# mapping); each merge's parts exist before it.  "ĉ t" can only apply under the
# qwen2 pre-tokenizer ("\ttabs" is one piece there, two pieces under smollm).
MERGES = [
    ("Ġ", "t"), ("h", "e"), ("i", "n"), ("e", "r"), ("a", "n"), ("Ġ", "a"), ("o", "n"),
    ("r", "e"), ("Ġt", "he"), ("e", "n"), ("a", "t"), ("o", "u"), ("e", "d"), ("Ġ", "s"),
    ("Ġ", "w"), ("n", "d"), ("Ġ", "o"), ("in", "g"), ("Ġ", "c"), ("e", "s"), ("Ġ", "b"),
    ("o", "r"), ("Ġ", "f"), ("Ġ", "m"), ("l", "l"), ("i", "t"), ("Ġ", "h"), ("Ġ", "p"),
    ("a", "r"), ("l", "e"), ("Ġ", "i"), ("Ġ", "d"), ("Ġa", "nd"), ("i", "s"), ("Ġ", "is"),
    ("ĉ", "t"), ("Ġo", "f"), ("Ġ", "n"), ("Ġt", "o"), ("Ġ", "Ġ"), ("Ġc", "at"),
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TOKENIZER_TEXTS = [
    "the cat is on the mat and the dog is in the house",
    "<|im_start|>user\nHello, world! 123<|im_end|>\n<|im_start|>assistant\n",
    "Café naïve — 日本語",
    "  leading spaces\n\n\ttabs and trailing  ",
    "x = 12345 + 3.14; it's THE end<|endoftext|>",
]


# ----------------------------------------------------------------- vocab
def build_vocab():
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]  # id == byte value
    types = [1] * 256
    for left, right in MERGES:
        assert left in tokens and right in tokens, (left, right)
        tokens.append(left + right)
        types.append(1)
    for s in SPECIALS:
        tokens.append(s)
        types.append(3)  # CONTROL
    assert len(set(tokens)) == len(tokens)
    merges = [f"{l} {r}" for l, r in MERGES]
    return tokens, types, merges


# --------------------------------------------------------------- weights
def grid(rng, shape, std, q8_blocks=False):
    """Random values q * 2**-k, q integer in [-127, 127] (uniform): exact in every format."""
    s = 2.0 ** np.round(np.log2(std / 73.3))  # std of U{-127..127} ~ 73.3
    q = rng.integers(-127, 128, size=shape)
    if q8_blocks:  # make every 32-block's absmax exactly 127 so Q8_0's scale is s
        assert shape[-1] % 32 == 0
        blk = q.reshape(*shape[:-1], shape[-1] // 32, 32)
        blk[..., 0] = np.where(rng.random(blk.shape[:-1]) < 0.5, -127, 127)
        q = blk.reshape(shape)
    return (q * s).astype(np.float32)


def norm_weight(rng, n):
    return (np.round((1.0 + 0.1 * rng.standard_normal(n)) * 64) / 64).astype(np.float32)


def make_weights(arch):
    """HF-named float32 tensors (HF layout: [out, in])."""
    rng = np.random.default_rng(SEEDS[arch])
    tokens, _, _ = build_vocab()
    V = len(tokens)
    W = {"model.embed_tokens.weight": grid(rng, (V, HIDDEN), 0.5)}
    for i in range(N_LAYERS):
        p = f"model.layers.{i}."
        W[p + "input_layernorm.weight"] = norm_weight(rng, HIDDEN)
        W[p + "self_attn.q_proj.weight"] = grid(rng, (N_HEADS * HEAD_DIM, HIDDEN), 0.3)
        W[p + "self_attn.k_proj.weight"] = grid(rng, (N_KV_HEADS * HEAD_DIM, HIDDEN), 0.3)
        W[p + "self_attn.v_proj.weight"] = grid(rng, (N_KV_HEADS * HEAD_DIM, HIDDEN), 0.3)
        if arch == "qwen2":
            W[p + "self_attn.q_proj.bias"] = grid(rng, (N_HEADS * HEAD_DIM,), 0.2)
            W[p + "self_attn.k_proj.bias"] = grid(rng, (N_KV_HEADS * HEAD_DIM,), 0.2)
            W[p + "self_attn.v_proj.bias"] = grid(rng, (N_KV_HEADS * HEAD_DIM,), 0.2)
        W[p + "self_attn.o_proj.weight"] = grid(rng, (HIDDEN, N_HEADS * HEAD_DIM), 0.25)
        W[p + "post_attention_layernorm.weight"] = norm_weight(rng, HIDDEN)
        W[p + "mlp.gate_proj.weight"] = grid(rng, (INTERMEDIATE, HIDDEN), 0.3)
        W[p + "mlp.up_proj.weight"] = grid(rng, (INTERMEDIATE, HIDDEN), 0.3)
        W[p + "mlp.down_proj.weight"] = grid(rng, (HIDDEN, INTERMEDIATE), 0.2, q8_blocks=True)
    W["model.norm.weight"] = norm_weight(rng, HIDDEN)
    if arch == "qwen2":
        W["lm_head.weight"] = grid(rng, (V, HIDDEN), 0.3)
    return W


# ----------------------------------------------------------- safetensors
def to_bf16_bytes(a):
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4")
    assert np.all((u & 0xFFFF) == 0), "value not exactly representable in bf16"
    return (u >> 16).astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype):
    """Minimal safetensors writer (F32 or BF16), tensors in sorted name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        data = np.ascontiguousarray(a, dtype="<f4").tobytes() if dtype == "F32" else to_bf16_bytes(a)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Independent minimal reader (F32/BF16/F16) -> dict of float64 arrays."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        raw = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        buf = raw[s:e]
        if info["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif info["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2")
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype("<u4") << 16).view("<f4")
        else:
            raise ValueError(info["dtype"])
        out[name] = a.astype(np.float64).reshape(info["shape"])
    del base
    return out


# ------------------------------------------------------------------ GGUF
def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half rows -> interleaved pairs)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def gguf_tensor_plan(arch, W):
    """[(gguf_name, float32 array in GGUF row order, GGML type)] in convert order."""
    F32, F16, Q8 = GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.Q8_0
    mat = F16 if arch == "llama" else F32
    plan = [("token_embd.weight", W["model.embed_tokens.weight"], F16)]
    for i in range(N_LAYERS):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        wq = W[p + "self_attn.q_proj.weight"]
        wk = W[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            wq = permute(wq, N_HEADS, N_HEADS)
            wk = permute(wk, N_HEADS, N_KV_HEADS)
        plan += [
            (b + "attn_norm.weight", W[p + "input_layernorm.weight"], F32),
            (b + "attn_q.weight", wq, mat),
            (b + "attn_k.weight", wk, mat),
            (b + "attn_v.weight", W[p + "self_attn.v_proj.weight"], mat),
        ]
        if arch == "qwen2":
            plan += [
                (b + "attn_q.bias", W[p + "self_attn.q_proj.bias"], F32),
                (b + "attn_k.bias", W[p + "self_attn.k_proj.bias"], F32),
                (b + "attn_v.bias", W[p + "self_attn.v_proj.bias"], F32),
            ]
        plan += [
            (b + "attn_output.weight", W[p + "self_attn.o_proj.weight"], mat),
            (b + "ffn_norm.weight", W[p + "post_attention_layernorm.weight"], F32),
            (b + "ffn_gate.weight", W[p + "mlp.gate_proj.weight"], mat),
            (b + "ffn_up.weight", W[p + "mlp.up_proj.weight"], mat),
            (b + "ffn_down.weight", W[p + "mlp.down_proj.weight"], Q8),
        ]
    plan.append(("output_norm.weight", W["model.norm.weight"], F32))
    if "lm_head.weight" in W:
        plan.append(("output.weight", W["lm_head.weight"], F32))
    return plan


def write_gguf(path, arch, W, tokens, types, merges, bos_id, eos_id, pad_id):
    w = gguf.GGUFWriter(path, arch)
    w.add_type("model")
    w.add_name(f"Tiny {arch} test model")
    w.add_size_label("tiny")
    w.add_block_count(N_LAYERS)
    w.add_context_length(MAX_POS)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(INTERMEDIATE)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if arch == "llama" else gguf.LlamaFileType.ALL_F32)
    if arch == "llama":
        w.add_vocab_size(len(tokens))
        w.add_rope_dimension_count(HEAD_DIM)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm" if arch == "llama" else "qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos_id)
    w.add_eos_token_id(eos_id)
    w.add_pad_token_id(pad_id)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr, qtype in gguf_tensor_plan(arch, W):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if qtype == GGMLQuantizationType.F32:
            data = arr
        elif qtype == GGMLQuantizationType.F16:
            data = arr.astype(np.float16)
            assert np.array_equal(data.astype(np.float32), arr), f"{name} not exact in F16"
        else:
            data = quantize(arr, qtype)
            back = dequantize(data, qtype).reshape(arr.shape)
            assert np.array_equal(back, arr), f"{name} not exact in {qtype.name}"
            w.add_tensor(name, data, raw_dtype=qtype)
            continue
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ------------------------------------------- HF-convention numpy forward
def hf_forward(W, tokens, tied):
    """Straight transcription of transformers' Llama/Qwen2 forward (eager, float64)."""
    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * w

    def rotate_half(x):
        h = x.shape[-1] // 2
        return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)

    tokens = np.asarray(tokens)
    T = len(tokens)
    inv_freq = 1.0 / (ROPE_THETA ** (np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM))
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)  # [T, head_dim]
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    n_rep = N_HEADS // N_KV_HEADS
    causal = np.triu(np.full((T, T), -np.inf), k=1)

    x = W["model.embed_tokens.weight"][tokens]
    for i in range(N_LAYERS):
        p = f"model.layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = h @ W[p + "self_attn.q_proj.weight"].T + W.get(p + "self_attn.q_proj.bias", 0.0)
        k = h @ W[p + "self_attn.k_proj.weight"].T + W.get(p + "self_attn.k_proj.bias", 0.0)
        v = h @ W[p + "self_attn.v_proj.weight"].T + W.get(p + "self_attn.v_proj.bias", 0.0)
        q = q.reshape(T, N_HEADS, HEAD_DIM)
        k = k.reshape(T, N_KV_HEADS, HEAD_DIM)
        v = v.reshape(T, N_KV_HEADS, HEAD_DIM)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, n_rep, axis=1)  # repeat_kv: head h uses kv head h // n_rep
        v = np.repeat(v, n_rep, axis=1)
        out = np.empty((T, N_HEADS, HEAD_DIM))
        for hd in range(N_HEADS):
            s = q[:, hd, :] @ k[:, hd, :].T / np.sqrt(HEAD_DIM) + causal
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s = s / s.sum(axis=-1, keepdims=True)
            out[:, hd, :] = s @ v[:, hd, :]
        x = x + out.reshape(T, -1) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1.0 + np.exp(-g))) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if tied else W["lm_head.weight"]
    return x @ head.T


# ------------------------------------------------------------------ main
def hf_config(arch, V, bos_id, eos_id):
    cfg = {
        "architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM"],
        "model_type": arch,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": N_LAYERS,
        "num_attention_heads": N_HEADS,
        "num_key_value_heads": N_KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "vocab_size": V,
        "max_position_embeddings": MAX_POS,
        "tie_word_embeddings": arch == "llama",
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32" if arch == "llama" else "bfloat16",
        "initializer_range": 0.02,
        "use_cache": True,
    }
    if arch == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    else:
        cfg.update({"use_sliding_window": False, "sliding_window": MAX_POS, "max_window_layers": N_LAYERS})
    return cfg


def tokenizer_config(arch, tokens):
    added = {}
    for i, t in enumerate(tokens):
        if t in SPECIALS:
            added[str(i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                             "single_word": False, "special": True}
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": "<|im_start|>" if arch == "llama" else None,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": MAX_POS,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "GPT2Tokenizer" if arch == "llama" else "Qwen2Tokenizer",
        "unk_token": None,
    }


def make(arch, out_dir):
    tokens, types, merges = build_vocab()
    V = len(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    eot, im_start, im_end = ids["<|endoftext|>"], ids["<|im_start|>"], ids["<|im_end|>"]
    # SmolLM2-like ids for llama (bos <|im_start|>), Qwen2.5-like for qwen2 (bos <|endoftext|>)
    bos_id = im_start if arch == "llama" else eot
    eos_id, pad_id = im_end, eot
    tied = arch == "llama"

    W = make_weights(arch)
    hf_dir = os.path.join(out_dir, f"tiny-{arch}")
    os.makedirs(hf_dir, exist_ok=True)
    with open(os.path.join(hf_dir, "config.json"), "w") as f:
        json.dump(hf_config(arch, V, bos_id, eos_id), f, indent=2)
        f.write("\n")
    st_path = os.path.join(hf_dir, "model.safetensors")
    write_safetensors(st_path, W, "F32" if arch == "llama" else "BF16")

    pre = "smollm" if arch == "llama" else "qwen2"
    tok = make_tokenizer(tokens, types, merges, pre, bos_id, eos_id, add_bos=False)
    if arch == "qwen2":
        tok.normalizer = normalizers.NFC()  # as in Hugging Face's Qwen2 tokenizer.json
    tok.save(os.path.join(hf_dir, "tokenizer.json"), pretty=True)
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(arch, tokens), f, indent=2, ensure_ascii=False)
        f.write("\n")

    gguf_path = os.path.join(out_dir, f"tiny-{arch}.gguf")
    write_gguf(gguf_path, arch, W, tokens, types, merges, bos_id, eos_id, pad_id)

    # ---- checks + reference logits
    W_hf = read_safetensors(st_path)
    assert set(W_hf) == set(W)
    if arch == "llama":  # the F32 file must also load with the safetensors package
        from safetensors.numpy import load_file
        lib = load_file(st_path)
        assert all(np.array_equal(lib[k], W[k]) for k in W)
    for k in W:
        assert np.array_equal(W_hf[k], W[k].astype(np.float64)), k

    model = GGUFModel(gguf_path)
    assert model.arch == arch and model.vocab_size == V and model.tied_embeddings == tied

    from gguf_tokenizer import build_tokenizer
    tok_gguf, _ = build_tokenizer(gguf_path)
    tok_hf = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    tok_cases = []
    for text in TOKENIZER_TEXTS:
        a = tok_hf.encode(text).ids
        b = tok_gguf.encode(text).ids
        assert a == b, (text, a, b)
        assert tok_hf.decode(a, skip_special_tokens=False) == text
        tok_cases.append({"text": text, "ids": a})

    rng = np.random.default_rng(SEEDS[arch] + 1)
    seqs = [
        [im_start],
        [int(t) for t in rng.integers(0, V, size=7)],
        [int(t) for t in rng.integers(0, V, size=20)],
    ]
    seqs[2][5] = im_end  # make sure special ids appear too
    records, worst = [], 0.0
    for s in seqs:
        lg = model.forward(s)
        lh = hf_forward(W_hf, s, tied)
        diff = float(np.max(np.abs(lg - lh)))
        worst = max(worst, diff)
        assert diff < 1e-5, f"{arch}: GGUF reference and HF forward disagree by {diff}"
        records.append({"ids": s, "logits_gguf": lg.tolist(), "logits_hf": lh.tolist(),
                        "max_abs_diff": diff})

    # KV-cache path of the reference == full forward
    cache, parts = {}, []
    for a, b in ((0, 7), (7, 8), (8, 20)):
        parts.append(model.forward(seqs[2][a:b], cache=cache))
    assert np.max(np.abs(np.concatenate(parts) - np.asarray(records[2]["logits_gguf"]))) < 1e-12

    # sensitivity check: with the wrong RoPE pairing the llama GGUF must NOT match
    model.rope_neox = not model.rope_neox
    wrong = float(np.max(np.abs(model.forward(seqs[2]) - np.asarray(records[2]["logits_hf"]))))
    model.rope_neox = not model.rope_neox
    assert wrong > 1e-3, f"{arch}: RoPE convention does not affect the logits ({wrong})"

    ref = {
        "arch": arch,
        "gguf": os.path.basename(gguf_path),
        "hf_dir": os.path.basename(hf_dir),
        "script": "scripts/reference/make_tiny_models.py",
        "compute_dtype": "float64",
        "logits_gguf_source": "scripts/reference/numpy_llama.py on the GGUF (llama.cpp conventions: "
                              + ("permuted q/k + adjacent-pair RoPE)" if arch == "llama" else "NEOX RoPE)"),
        "logits_hf_source": "HF-convention numpy forward on model.safetensors (rotate-half RoPE, unpermuted)",
        "logits_layout": "logits_*[position][vocab] for every position of ids",
        "max_abs_diff_gguf_vs_hf": worst,
        "wrong_rope_max_abs_diff": wrong,
        "config": {
            "hidden_size": HIDDEN, "num_hidden_layers": N_LAYERS, "num_attention_heads": N_HEADS,
            "num_key_value_heads": N_KV_HEADS, "head_dim": HEAD_DIM, "intermediate_size": INTERMEDIATE,
            "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_THETA, "vocab_size": V,
            "max_position_embeddings": MAX_POS, "tie_word_embeddings": tied,
            "bos_token_id": bos_id, "eos_token_id": eos_id, "pad_token_id": pad_id,
        },
        "gguf_tensor_types": {name: qt.name for name, _, qt in gguf_tensor_plan(arch, W)},
        "tokenizer_cases": tok_cases,
        "sequences": records,
    }
    with open(os.path.join(out_dir, f"tiny-{arch}.reference.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False)
        f.write("\n")
    print(f"tiny-{arch}: vocab {V}, max |gguf - hf| = {worst:.3e}, wrong-RoPE diff = {wrong:.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="tiny llama/qwen2 fixtures")
    ap.add_argument("--out", default="tests/fixtures")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for arch in ("llama", "qwen2"):
        make(arch, args.out)


if __name__ == "__main__":
    sys.exit(main())
