"""Per-token acceptance of a draft model's token under lossless sampled verification:
greedy draft (argmax q, accepted with p(x)) against a draft sampled from q (accepted with
min(1, p/q), i.e. 1 - TV(p, q) on average), along target-sampled trajectories."""
import json, sys, numpy as np
from llama_cpp import Llama
T = float(sys.argv[1]) if len(sys.argv) > 1 else 0.7
N = int(sys.argv[2]) if len(sys.argv) > 2 else 8
DV = 65536
tgt = Llama("/root/.cache/draftsmith/models/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct.gguf", n_ctx=1024, logits_all=True, n_threads=2, verbose=False, seed=0)
drf = Llama("/root/.cache/draftsmith/models/qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct.gguf", n_ctx=1024, logits_all=True, n_threads=2, verbose=False)
probs = [json.loads(l)["prompt"] for l in open("/root/.cache/draftsmith/datasets/humaneval/HumanEval.jsonl")][:N]
def sm(l):
    l = l / T
    e = np.exp(l - l.max()); return e / e.sum()
A, B, G = [], [], []
rng = np.random.default_rng(0)
for pi, pr in enumerate(probs):
    text = f"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{pr}<|im_end|>\n<|im_start|>assistant\n"
    ids = tgt.tokenize(text.encode(), add_bos=False, special=True)
    tgt.reset(); tgt.eval(ids)
    gen = []
    for _ in range(128):
        p = sm(np.array(tgt.scores[tgt.n_tokens - 1], dtype=np.float64))
        x = int(rng.choice(len(p), p=p))
        if x == tgt.token_eos(): break
        gen.append(x); tgt.eval([x])
    tl = np.array(tgt.scores[len(ids) - 1: len(ids) - 1 + len(gen)], dtype=np.float64)
    drf.reset(); drf.eval(ids + gen)
    dl = np.array(drf.scores[len(ids) - 1: len(ids) - 1 + len(gen)], dtype=np.float64)
    for t in range(len(gen)):
        p = sm(tl[t]); q = np.zeros_like(p); q[:DV] = sm(dl[t][:DV])
        xd = int(np.argmax(q))
        A.append(p[xd]); B.append(np.minimum(p, q).sum()); G.append(float(np.argmax(p) == xd))
    print(f"prompt {pi}: {len(gen)} tokens, greedy-draft {np.mean(A):.3f} sampled-draft {np.mean(B):.3f} (greedy-greedy match {np.mean(G):.3f})", flush=True)
a, b = np.mean(A), np.mean(B)
def tau(al, g=6): return (1 - al ** (g + 1)) / (1 - al)
print(f"T={T}: per-token acceptance greedy draft {a:.3f}, sampled draft {b:.3f}; i.i.d. chain of 6: tau {tau(a):.2f} vs {tau(b):.2f}")
