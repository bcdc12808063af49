# draftsmith tasks. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The default target model (SmolLM2-135M-Instruct, Q4_1 GGUF).
model := "smollm2-135m"
bin := env_var_or_default("CARGO_TARGET_DIR", "target") + "/release/draftsmith"

# Build the release binary (CPU backend).
build:
    cargo build --release -p draftsmith-cli

# Build the CUDA binary (needs no GPU to build; CUDA 13 at run time).
build-cuda:
    CUDARC_CUDA_VERSION=13000 cargo build --release -p draftsmith-cli --features cuda

# Fetch a model or dataset (default: the default model).
fetch name=model: build
    {{bin}} fetch {{name}}

# Generate a reply with the default model.
generate prompt="Write a haiku about the sea." *args="": build
    {{bin}} generate --prompt "{{prompt}}" {{args}}

# Run the test suite (fetches the default model first; real-model tests need it).
test:
    cargo build --release -p draftsmith-cli
    {{bin}} fetch {{model}}
    DRAFTSMITH_REQUIRE_MODELS=1 cargo test --workspace --release

# Decode/prefill/tree-verify benchmark of the target engine.
bench *args="": build
    {{bin}} bench ar {{args}}

# The same benchmark side by side with llama.cpp on the same GGUF and prompts.
bench-vs-llamacpp *args="": build install-llamacpp
    {{bin}} bench ar --vs-llamacpp {{args}}

# Quantized-kernel micro-benchmarks.
bench-kernels:
    cargo bench -p draftsmith-kernels

# Install llama-cpp-python (compiles llama.cpp: ~13 minutes on 2 cores, cached by pip after).
install-llamacpp:
    python3 -c "import llama_cpp" 2>/dev/null || pip install llama-cpp-python numpy

# Regenerate the golden logits with the independent numpy reference.
golden:
    pip install gguf numpy tokenizers
    python3 scripts/reference/make_golden.py --model "$({{bin}} fetch {{model}} | tail -n1)" --out tests/golden/smollm2-135m

# Context-heavy prompts built from the public-domain texts (n-gram trie evaluation).
context-tasks: build
    python3 scripts/make_context_tasks.py --gutenberg "$({{bin}} fetch gutenberg | tail -n1)" --kjv "$({{bin}} fetch kjv | tail -n1)" --out data/context-tasks.jsonl
