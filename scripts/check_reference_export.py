#!/usr/bin/env python3
"""Checks a `draftsmith export --format reference --probe` directory with the reference
implementation's own loading and drafting code, out of tree.

The reference (apple/ml-recurrent-drafter) is not part of draftsmith: fetch it yourself and pass
its checkout with --reference-repo. This script puts that checkout on sys.path, loads the export
exactly as the reference's `cmd/generate.py` does (`modeling_drafter.register_auto_models()`, then
`transformers.AutoModel.from_pretrained(dir, torch_dtype=...)`), and compares, on the probe's
inputs, the reference module's RNN state and output-layer logits with what draftsmith computed
(`probe.safetensors`). It then runs one step of the reference's own `beam_search_candidates` and
compares the drafted tokens with draftsmith's top token.

Needs: torch, transformers<5 (the reference uses `PreTrainedModel` APIs of 4.x), safetensors,
numpy, and the reference package's own imports (jsonlines, tabulate, ...).

Exit status 0 when the loader reports no missing, unexpected or mismatched tensors and the
logits agree within the tolerance.
"""

import argparse
import json
import pathlib
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference-repo", required=True, type=pathlib.Path,
                   help="a checkout of apple/ml-recurrent-drafter")
    p.add_argument("--export", required=True, type=pathlib.Path,
                   help="the directory `draftsmith export --format reference --probe` wrote")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest |ref - draftsmith| / (1 + |draftsmith|) allowed on the logits")
    args = p.parse_args()

    import torch
    import transformers
    from safetensors.torch import load_file

    sys.path.insert(0, str(args.reference_repo.resolve()))
    from recurrent_drafting import modeling_drafter  # the reference's code, not ours

    config = json.loads((args.export / "config.json").read_text())
    dtype = getattr(torch, config.get("torch_dtype", "float32"))
    modeling_drafter.register_auto_models()
    drafter, info = transformers.AutoModel.from_pretrained(
        str(args.export), torch_dtype=dtype, output_loading_info=True
    )
    drafter = drafter.float().eval()
    print(f"reference loader: {type(drafter).__module__}.{type(drafter).__name__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}, weights {dtype}")
    problems = {k: v for k, v in info.items() if v}
    print(f"loading info: {info}")
    n_params = sum(t.numel() for t in drafter.parameters())
    print(f"config: vocab {drafter.config.vocab_size}, hidden {drafter.config.hidden_size}, "
          f"exit_dim {drafter.config.exit_dim}, {drafter.config.num_draft_layers} ResBlocks, "
          f"rnn {drafter.config.rnn}; {n_params / 1e6:.1f} M parameters")

    probe = load_file(str(args.export / "probe.safetensors"))
    context, embedding = probe["context"], probe["token_embedding"]
    rows, hidden = context.shape
    head = getattr(drafter.lm_head, str(drafter.config.num_draft_layers)).weight
    kept = head.abs().sum(dim=1) != 0  # rows outside a draft vocabulary are zero
    with torch.no_grad():
        # The state update of `Drafter.beam_search_candidates`, from the zero state.
        zero = torch.zeros(rows, hidden)
        state = (torch.nn.functional.silu(drafter.rnn_w(embedding) + drafter.rnn_u(zero))
                 if drafter.config.rnn else embedding + zero)
        logits = drafter.lm_head(torch.cat([context, state], dim=-1))

        # One step of the reference's own beam search, from tokens whose embeddings are the probe's.
        table = torch.nn.Embedding(drafter.config.vocab_size, hidden)
        table.weight.zero_()
        table.weight[:rows] = embedding
        beams, _ = drafter.beam_search_candidates(
            context, torch.arange(rows), table, modeling_drafter.BeamShape(1, 2)
        )
    ours = probe["logits"]
    state_err = ((state - probe["state"]).abs() / (1 + probe["state"].abs())).max().item()
    logit_err = ((logits - ours).abs() / (1 + ours.abs()))[:, kept].max().item()
    ours_top = ours.masked_fill(~kept, float("-inf")).argmax(dim=-1)
    drafted = beams[:, 0, 1]
    agree = int((drafted == ours_top).sum())
    print(f"probe: {rows} rows, {int(kept.sum())} of {drafter.config.vocab_size} output rows in use")
    print(f"RNN state: largest relative difference {state_err:.2e}")
    print(f"logits: largest relative difference {logit_err:.2e} (tolerance {args.tolerance:.0e})")
    print(f"beam_search_candidates drafted {drafted.tolist()}, draftsmith's top tokens "
          f"{ours_top.tolist()}: {agree}/{rows} agree")
    ok = not problems and logit_err <= args.tolerance and state_err <= args.tolerance
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
