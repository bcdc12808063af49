#!/usr/bin/env python3
"""Build a Hugging Face `tokenizers` tokenizer from a GGUF's embedded vocab.

Only ``tokenizer.ggml.model == "gpt2"`` (byte-level BPE) is supported, which is
what both SmolLM2 (pre "smollm") and Qwen2/2.5 (pre "qwen2") use.  The rules
mirror llama.cpp's ``llama_vocab`` for these pre-tokenizer types:

* ``smollm`` (LLAMA_VOCAB_PRE_TYPE_SMOLLM, shared with starcoder/refact/...):
  llama.cpp splits with the regex list ``["\\p{N}", GPT2_REGEX]`` i.e. every
  numeric character becomes its own piece first, then the GPT-2 regex
  ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)``.
  Expressed here as ``Sequence[Digits(individual_digits=True),
  ByteLevel(add_prefix_space=False, use_regex=True)]`` (HF's ByteLevel regex is
  the same GPT-2 regex plus a trailing ``|\\s+`` alternative, which only covers
  text llama.cpp would emit as an unmatched piece anyway).
* ``qwen2`` (LLAMA_VOCAB_PRE_TYPE_QWEN2): one regex,
  ``(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``
  as ``Split(isolated)`` followed by ``ByteLevel(use_regex=False)``.  Note: the
  Hugging Face Qwen2 tokenizer.json additionally has an NFC normalizer; llama.cpp
  does not normalise, and neither does this builder (use NFC text to avoid the
  difference).
* ``gpt2`` / default: ``ByteLevel(use_regex=True)``.

Byte-level BPE: pieces are mapped bytes->unicode with the GPT-2 table, then BPE
merges are applied in rank order (``tokenizer.ggml.merges``, "left right").
Tokens with ``token_type`` CONTROL (3) are added as special tokens and
USER_DEFINED (4) as plain added tokens; both are matched as whole tokens in the
input text before pre-tokenisation (llama.cpp with parse_special=true).  A BOS
(``tokenizer.ggml.bos_token_id``) is prepended only if
``tokenizer.ggml.add_bos_token`` is true (false for SmolLM2 and Qwen2.5).

Library use: ``build_tokenizer(gguf_path_or_reader) -> (tokenizers.Tokenizer, info)``.
CLI: ``python3 scripts/reference/gguf_tokenizer.py --model M.gguf --text "hi"``
prints the ids.  Requires ``pip install gguf tokenizers``.
"""

from __future__ import annotations

import argparse
import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_UNKNOWN = 2
TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4
TOKEN_TYPE_UNUSED = 5
TOKEN_TYPE_BYTE = 6

QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

SMOLLM_LIKE_PRE = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode char table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def pre_tokenizer_for(pre: str):
    if pre in SMOLLM_LIKE_PRE:
        return pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    if pre in ("qwen2", "stablelm2"):
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    if pre in ("gpt2", "default", "gpt-2"):
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raise NotImplementedError(f"pre-tokenizer {pre!r} not implemented")


def make_tokenizer(tokens, token_types, merges, pre, bos_id=None, eos_id=None, add_bos=False):
    """Assemble a byte-level BPE `tokenizers.Tokenizer` from raw vocab pieces."""
    vocab = {}
    for i, t in enumerate(tokens):
        if t in vocab:
            raise ValueError(f"duplicate token {t!r} at {i} and {vocab[t]}")
        vocab[t] = i
    merge_pairs = []
    for m in merges:
        left, right = m.split(" ")
        merge_pairs.append((left, right))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merge_pairs, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizer_for(pre)
    tok.decoder = decoders.ByteLevel()
    added = []
    for i, (t, ty) in enumerate(zip(tokens, token_types)):
        if ty == TOKEN_TYPE_CONTROL:
            added.append(AddedToken(t, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False))
        elif ty == TOKEN_TYPE_USER_DEFINED:
            added.append(AddedToken(t, special=False, normalized=False, lstrip=False, rstrip=False, single_word=False))
    # add in id order so the added-token ids match the vocab ids
    tok.add_tokens(added)
    if add_bos:
        bos = tokens[bos_id]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    for t, ty in zip(tokens, token_types):
        if ty in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED):
            assert tok.token_to_id(t) == vocab[t], t
    return tok


def build_tokenizer(model):
    """(Tokenizer, info dict) from a GGUF path or an open GGUFReader."""
    reader = model if isinstance(model, GGUFReader) else GGUFReader(model)
    f = reader.fields

    def val(key, default=None):
        return f[key].contents() if key in f else default

    kind = val("tokenizer.ggml.model")
    if kind != "gpt2":
        raise NotImplementedError(f"tokenizer.ggml.model={kind!r} (only gpt2 byte-level BPE)")
    pre = val("tokenizer.ggml.pre", "default")
    tokens = val("tokenizer.ggml.tokens")
    types = val("tokenizer.ggml.token_type")
    merges = val("tokenizer.ggml.merges")
    bos = val("tokenizer.ggml.bos_token_id")
    eos = val("tokenizer.ggml.eos_token_id")
    add_bos = bool(val("tokenizer.ggml.add_bos_token", False))
    tok = make_tokenizer(tokens, types, merges, pre, bos, eos, add_bos)
    info = {
        "model": kind,
        "pre": pre,
        "vocab_size": len(tokens),
        "n_merges": len(merges),
        "bos_token_id": bos,
        "eos_token_id": eos,
        "add_bos_token": add_bos,
        "special_tokens": {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == TOKEN_TYPE_CONTROL},
        "user_defined_tokens": {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == TOKEN_TYPE_USER_DEFINED},
    }
    return tok, info


def main(argv=None):
    ap = argparse.ArgumentParser(description="tokenize text with a GGUF's embedded vocab")
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    args = ap.parse_args(argv)
    tok, info = build_tokenizer(args.model)
    enc = tok.encode(args.text, add_special_tokens=True)
    print(info["pre"], enc.ids)
    print(enc.tokens)


if __name__ == "__main__":
    sys.exit(main())
