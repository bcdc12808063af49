#!/bin/bash
# Device run (session 57): the engine's and the CLI's CUDA tests at this session's starting code
# (9a8b3bf, last run on a GPU in session 36 at 444f88a), then the CPU kernels' tests on the GPU
# machine's Xeon host (AMX and AVX-512 VNNI) and SmolLM2's matrices with their weights streamed
# and in cache (`qmatmul --hot`). Binaries built on this session's 2-core Xeon, stripped and
# xz-compressed in .dev/ (not committed); eval/results/ moved out of the tree for the call (the
# tool carries 64 MiB), so SmolLM2-135M (94 MB) does not travel either.
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:-/tmp/out}; mkdir -p $R
S=/tmp/stage; mkdir -p $S
for f in .dev/*.xz; do n=$(basename $f .xz); xz -dc $f > $S/$n; chmod +x $S/$n; done
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz|L2|L3"; grep -o -E "amx[a-z0-9_]*|avx512_vnni|avx512_bf16|avx_vnni" /proc/cpuinfo | sort | uniq -c; uname -r; sha256sum $S/*; } > $R/machine.txt 2>&1
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s) - s )) s" | tee -a $R/steps.txt; }
export DRAFTSMITH_REQUIRE_CUDA=1
CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-model step model-cuda 120 $S/model-cuda --test-threads 1
DRAFTSMITH_BIN=$S/draftsmith-cuda CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-cli step cli-cuda 240 $S/cli-cuda --test-threads 3
unset DRAFTSMITH_REQUIRE_CUDA
CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-kernels step kernels-tests 120 $S/kernels-tests --test-threads 8
DRAFTSMITH_THREADS=2 RAYON_NUM_THREADS=2 step bench-hot-2t 150 $S/qmatmul --model-only --int8 --hot --rows 1,2,4,8,16
grep -h -E "^test result|FAILED|panicked" $R/*.log | sort | uniq -c
grep -h -E "(model step|hot layers|cold layers) n" $R/bench-*.log
cat $R/steps.txt
