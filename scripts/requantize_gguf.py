#!/usr/bin/env python3
"""Re-quantizes a GGUF file with llama.cpp's own quantizer (llama-cpp-python, `just
install-llamacpp`), e.g. to get a Q5_K_M file of a model the catalog has as Q4_K_M for
measuring the Q5_K kernels. The values are re-quantized from the source's (already quantized)
weights: fine for speed and lossless checks, not for quality claims.

    python3 scripts/requantize_gguf.py SRC.gguf DST.gguf --type Q5_K_M
"""
import argparse
import ctypes

import llama_cpp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", default="Q5_K_M", help="a llama.cpp file type: Q4_K_M, Q5_K_M, Q6_K, Q8_0, ...")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{args.type.upper()}", None)
    if ftype is None:
        raise SystemExit(f"unknown file type {args.type!r} (llama_cpp has no LLAMA_FTYPE_MOSTLY_{args.type.upper()})")
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = args.threads
    params.ftype = ftype
    params.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(args.src.encode(), args.dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed on {args.src} (rc {rc})")
    print(f"wrote {args.dst}")


if __name__ == "__main__":
    main()
