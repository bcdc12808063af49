#!/usr/bin/env bash
# Installs llama-cpp-python (the llama.cpp baseline of `draftsmith bench ar --vs-llamacpp`) built
# for this CPU with explicit SIMD flags instead of GGML_NATIVE: a native build on a machine with
# AMX segfaulted in its first eval (2026-11-23), so AMX is never enabled; AVX2, AVX-512 and the
# VNNI extensions are enabled when /proc/cpuinfo lists them. Compiles llama.cpp (~13 min on 2
# cores); pip caches the wheel, and an installed build whose flags match is kept.
set -euo pipefail
version="${LLAMACPP_VERSION:-0.3.36}"
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
for f in avx avx2 fma f16c; do
    if has "$f"; then args+=" -DGGML_${f^^}=ON"; else args+=" -DGGML_${f^^}=OFF"; fi
done
if has avx512f && has avx512bw && has avx512vl; then args+=" -DGGML_AVX512=ON"; else args+=" -DGGML_AVX512=OFF"; fi
if has avx512_vnni; then args+=" -DGGML_AVX512_VNNI=ON"; else args+=" -DGGML_AVX512_VNNI=OFF"; fi
if has avx512_bf16; then args+=" -DGGML_AVX512_BF16=ON"; else args+=" -DGGML_AVX512_BF16=OFF"; fi
if has avx_vnni; then args+=" -DGGML_AVX_VNNI=ON"; else args+=" -DGGML_AVX_VNNI=OFF"; fi
stamp="$(python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null || echo /tmp)/draftsmith-llamacpp-flags"
if python3 -c "import llama_cpp" 2>/dev/null && [ "$(cat "$stamp" 2>/dev/null)" = "$version $args" ]; then
    echo "llama-cpp-python $version already built with: $args"
    exit 0
fi
echo "building llama-cpp-python $version with CMAKE_ARGS: $args"
python3 -m pip install --quiet numpy
CMAKE_ARGS="$args" FORCE_CMAKE=1 python3 -m pip install --force-reinstall --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" \
    "typing-extensions>=4.5" "diskcache>=5.6.1" "jinja2>=2.11.3" 2>&1 | tail -n 3
python3 -m pip install --quiet "typing-extensions>=4.5" "diskcache>=5.6.1" "jinja2>=2.11.3"
mkdir -p "$(dirname "$stamp")" && echo "$version $args" > "$stamp"
python3 -c "import llama_cpp; print(llama_cpp.__version__, llama_cpp.llama_print_system_info().decode())"
