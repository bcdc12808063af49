#!/bin/bash
# Device run 1 (session 30): AMX-INT8 kernels on the GPU machine's Xeon host (tests, then the
# kernel benchmark, AMX against AVX-512 VNNI, 2 threads and all), then the CUDA tests.
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp/out}; mkdir -p $R
S=/tmp/stage; mkdir -p $S
for f in .dev/*.xz; do n=$(basename $f .xz); [ -x $S/$n ] || { xz -dc $f > $S/$n; chmod +x $S/$n; }; done
{ date -u; lscpu; grep -o -E "amx[a-z0-9_]*|avx512_vnni|avx512_bf16|avx_vnni" /proc/cpuinfo | sort | uniq -c; uname -r; nproc; nvidia-smi -L; sha256sum $S/*; echo code: session 30 AMX; } > $R/machine.txt 2>&1
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s) - s )) s" | tee -a $R/steps.txt; }
export CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-model
step kernels-tests 120 $S/kernels-tests --test-threads 8
for t in model-lib batch_invariance tree_and_cache lossless batch draft_model redrafter; do
  [ -x $S/$t ] && step $t 60 $S/$t --test-threads 8
done
grep -h -E "^test result|FAILED|panicked" $R/*.log | sort | uniq -c
B=$S/qmatmul
DRAFTSMITH_THREADS=2 step bench-model-2t 150 $B --model-only --int8 --path-list avx512vnni,amx --rows 1,2,3,4,8,16,64
step bench-model-all 100 $B --model-only --int8 --path-list avx512vnni,amx --rows 1,2,4,8,64
DRAFTSMITH_THREADS=2 step bench-table-2t 150 $B --int8 --path-list avx512vnni,amx --rows 1
grep -h "model step n" $R/bench-model-*.log
if [ -x $S/cli-cuda ]; then
  export DRAFTSMITH_REQUIRE_CUDA=1
  step model-cuda 120 $S/model-cuda --test-threads 1
  DRAFTSMITH_BIN=$S/draftsmith-cuda CARGO_MANIFEST_DIR=$PWD/crates/draftsmith-cli step cli-cuda 200 $S/cli-cuda --test-threads 3
  tail -n 5 $R/model-cuda.log $R/cli-cuda.log
fi
cat $R/steps.txt
