#!/bin/bash
# Device run (session 27): the engine's and the CLI's CUDA tests on the tiny checked-in models,
# with binaries built on the 2-core CPU machine (CUDARC_CUDA_VERSION=13000, --features cuda).
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp/out}; mkdir -p $R
S=/tmp/stage; mkdir -p $S
for f in draftsmith cli-cuda model-cuda; do xz -dc .dev/$f.xz > $S/$f; chmod +x $S/$f; done
{ date -u; nvidia-smi; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; sha256sum $S/*; echo code: e6cbf64; } > $R/machine.txt 2>&1
export DRAFTSMITH_REQUIRE_CUDA=1
s=$(date +%s)
CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-model timeout 200 $S/model-cuda --test-threads 1 > $R/model-cuda.log 2>&1; echo "model-cuda rc=$? $(( $(date +%s) - s )) s" | tee -a $R/steps.txt
s=$(date +%s)
DRAFTSMITH_BIN=$S/draftsmith CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-cli timeout 300 $S/cli-cuda --test-threads 3 > $R/cli-cuda.log 2>&1; echo "cli-cuda rc=$? $(( $(date +%s) - s )) s" | tee -a $R/steps.txt
tail -n 25 $R/model-cuda.log $R/cli-cuda.log
