#!/bin/bash
# Device runs 2 and 3 (session 30): AMX kernels in pipelined rounds (run 3: four products in
# flight); tests, then AMX against AVX-512 VNNI. Binaries as xz in .dev/ (not committed).
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp/out}; mkdir -p $R
S=/tmp/stage2; mkdir -p $S
for f in .dev/*.xz; do n=$(basename $f .xz); xz -dc $f > $S/$n; chmod +x $S/$n; done
{ date -u; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"; grep -o -E "amx[a-z0-9_]*" /proc/cpuinfo | sort | uniq -c; sha256sum $S/*; } > $R/machine.txt 2>&1
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s) - s )) s" | tee -a $R/steps.txt; }
step kernels-tests 120 $S/kernels-tests --test-threads 8
grep -E "^test result|FAILED|panicked|amx" $R/kernels-tests.log
B=$S/qmatmul
DRAFTSMITH_THREADS=2 step bench-model-2t 150 $B --model-only --int8 --path-list avx512vnni,amx --rows 1,2,4,8,16,64
step bench-model-all 100 $B --model-only --int8 --path-list avx512vnni,amx --rows 1,8,64
DRAFTSMITH_THREADS=2 step bench-table-2t 150 $B --int8 --path-list avx512vnni,amx --rows 1
grep -h "model step n" $R/bench-model-*.log
grep -E " (8|64) " $R/bench-table-2t.log
