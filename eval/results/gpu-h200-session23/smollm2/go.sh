#!/bin/bash
# Session 23 device run, SmolLM2 on CUDA: each call brings one part of the GGUF (the 64 MiB
# limit), the call that completes the set assembles it and runs the engine's SmolLM2 CUDA tests.
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp/out}; M=/tmp/m; mkdir -p $M $R
cp .g[0-9]/* $M/ 2>/dev/null; ls -la $M | tee $R/parts.txt
[ -f $M/part.0 ] && [ -f $M/part.1 ] && [ -f $M/part.2 ] && [ -f $M/part.3 ] && [ -f $M/part.4 ] || { echo "waiting for parts"; exit 0; }
D=/root/.cache/draftsmith/models/smollm2-135m; mkdir -p $D
cat $M/part.0 $M/part.1 $M/part.2 $M/part.3 $M/part.4 > $D/SmolLM2-135M-Instruct.Q4_1.gguf
cp $M/*.sha256 $D/
(cd $D && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf; cat SmolLM2-135M-Instruct.Q4_1.gguf.sha256) | tee $R/sha.txt
xz -dc $M/model-cuda.xz > /tmp/model-cuda; chmod +x /tmp/model-cuda
{ date -u; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; sha256sum /tmp/model-cuda; } > $R/machine.txt 2>&1
s=$(date +%s)
DRAFTSMITH_REQUIRE_CUDA=1 DRAFTSMITH_REQUIRE_MODELS=1 CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-model timeout 400 /tmp/model-cuda --test-threads 1 --nocapture smollm2 > $R/smollm2-cuda.log 2>&1
echo "smollm2-cuda rc=$? $(( $(date +%s) - s )) s" | tee $R/steps.txt
tail -n 40 $R/smollm2-cuda.log
