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

# Demo sizes of the ReDrafter pipeline (CPU, 2 cores; the README has the measured times); override
# with `just distill_limit=4800 train_epochs=1 pipeline`, or `just pipeline-gpu` on a GPU host.
# 2400 prompts rather than 1200 (session 26): twice the distilled answers bought +2-6 % tokens
# per step under `auto`, +2-3 % speed priced at pooled costs (docs/redrafter.md).
distill_limit := "2400"
train_epochs := "1"
# Weight of the target's own next-token distribution in the drafter's loss (0: labels alone;
# docs/redrafter.md has what 0.5 did: higher acceptance, a lower `auto` speedup in session 22).
train_soft := "0"
# Draft vocabulary of the pipeline's drafter: the 4096 most frequent labels (94.5 % of them) rather
# than the CLI's 8192 (99.0 %). Session 27: the same first-token acceptance on MT-Bench (34.8 vs
# 34.6 %) for a drafter call a quarter cheaper (0.13 vs 0.17 ms; docs/redrafter.md).
train_draft_vocab := "4096"
run := "redrafter-demo"
distilled := "data/distilled/" + model + "-sharegpt-demo"

# Distil the target: its own greedy answers to ShareGPT prompts (resumable Parquet shards).
distill *args="": build
    {{bin}} distill --model {{model}} --data sharegpt --limit {{distill_limit}} --max-new-tokens 192 --max-prompt-tokens 256 --out {{distilled}} {{args}}

# The target's hidden states of the distilled data, once (optional: `train-redrafter` then reads
# them from <distilled>/hidden-states instead of recomputing them at every start).
hidden *args="": build
    {{bin}} hidden --model {{model}} --data {{distilled}} {{args}}

# Train a ReDrafter on the distilled data; exports checkpoints/<run>/drafter.safetensors + config.json.
train-redrafter *args="": build
    {{bin}} train redrafter --model {{model}} --data {{distilled}} --out checkpoints/{{run}} --epochs {{train_epochs}} --horizon 4 --soft-labels {{train_soft}} --draft-vocab {{train_draft_vocab}} {{args}}

# Train TokenSwift heads on long texts (Gutenberg + KJV, four books held out); exports
# checkpoints/tokenswift-demo/{drafter.safetensors,config.json} plus split.json and eval-prompts.jsonl.
train-tokenswift *args="": build
    {{bin}} train tokenswift --model {{model}} --out checkpoints/tokenswift-demo {{args}}

# TokenSwift vs AR on one held-out book prefix (needs `just train-tokenswift`): `max` new tokens
# greedy (lossless check) and `sampled_max` sampled (T = 1, min-p 0.1, θ = 1.2, W = 1024), EOS
# ignored (fixed lengths), statistics every 1024 tokens (tokens/s, α, β, Distinct-n, peak RSS),
# table at 1K/2K/4K/8K in eval/results/tokenswift-lengths/table.md. The paper's settings
# (`--draft-policy fixed`: dynamic draft KV, the full tree). A finished run is kept and
# skipped on a rerun; an interrupted one keeps the statistics lines it wrote.
tokenswift-lengths prompt="0" max="8192" sampled_max="8192": build
    #!/usr/bin/env bash
    set -euo pipefail
    run=checkpoints/tokenswift-demo
    out=eval/results/tokenswift-lengths
    mkdir -p $out
    sed -n "$(({{prompt}} + 1))p" $run/eval-prompts.jsonl | python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["prompt"])' > $out/prompt.txt
    for mode in greedy sampled; do
        flags="--max-new-tokens {{max}}"
        if [ $mode = sampled ]; then flags="--max-new-tokens {{sampled_max}} --temperature 1 --min-p 0.1 --penalty 1.2 --penalty-window 1024 --seed {{prompt}}"; fi
        for method in ar tokenswift; do
            if [ -s $out/$method-$mode.json ]; then echo "$out/$method-$mode.json: done, skipped"; continue; fi
            rm -f $out/$method-$mode.stats.jsonl
            {{bin}} generate --model {{model}} --method $method --drafter $run --prompt-file $out/prompt.txt --no-chat-template \
                --draft-policy fixed --ignore-eos $flags --json --stats-out $out/$method-$mode.stats.jsonl --stats-every 1024 > $out/$method-$mode.json.part
            mv $out/$method-$mode.json.part $out/$method-$mode.json
        done
    done
    python3 scripts/tokenswift_lengths.py $out > $out/table.md
    cat $out/table.md

# AR vs ReDrafter (beam width 1, 4, 16, tree attention) on MT-Bench first turns: τ, speedup, lossless check.
# Writes under eval/runs/ (not in git; `just eval --results DIR` elsewhere), so a freshly trained
# drafter is evaluated afresh; the recorded run of this recipe is eval/results/redrafter-demo.
eval *args="": build
    {{bin}} reproduce recipes/redrafter-demo.toml --results eval/runs {{args}}

# The whole pipeline on the default model: fetch → distill → hidden states → train → eval → report.
# (`hidden` runs the target over the data once, batched; training reads the states back.)
pipeline: distill hidden train-redrafter eval

# The full-size pipeline on a GPU host (recipes/redrafter-full.toml: 20K distilled answers,
# 2 epochs, 80 MT-Bench prompts, beam width 1-64); every stage resumes. Never run on a GPU yet
# (the CUDA engine, eval and bench have: eval/results/gpu-h100).
pipeline-gpu *args="": build-cuda
    {{bin}} reproduce recipes/redrafter-full.toml --device cuda {{args}}

# Run the test suite (fetches the default model first; real-model tests need it).
test: install-lavapipe
    cargo build --release -p draftsmith-cli
    {{bin}} fetch {{model}}
    DRAFTSMITH_REQUIRE_MODELS=1 DRAFTSMITH_REQUIRE_WGPU=1 cargo test --workspace --release
    just check-cuda lint

# Install Mesa's software Vulkan driver (lavapipe) for the wgpu tests, if missing (apt).
install-lavapipe:
    #!/usr/bin/env bash
    set -euo pipefail
    if ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then exit 0; fi
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null

# Formatting (rustfmt.toml), clippy and rustdoc (the crates' own docs) with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --release --all-targets -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --release --no-deps --quiet

# SmolLM2 greedy on wgpu against the dense CPU path over MT-Bench first turns (minutes on
# lavapipe); prints the table recorded in eval/results/wgpu/.
wgpu-vs-cpu tokens="64":
    DRAFTSMITH_WGPU_TOKENS={{tokens}} cargo test --release -p draftsmith-model --test wgpu -- --ignored --nocapture smollm2_greedy

# Compile (not run) the CUDA backend and its tests, so a change that breaks them is seen without a GPU.
check-cuda:
    CUDARC_CUDA_VERSION=13000 cargo check --release -p draftsmith-cli --features cuda
    CUDARC_CUDA_VERSION=13000 cargo check --release -p draftsmith-model --features cuda --test cuda
    CUDARC_CUDA_VERSION=13000 cargo check --release -p draftsmith-cli --features cuda --test cuda

# The CUDA checks on a machine with an NVIDIA GPU and CUDA 13: the engine's
# (crates/draftsmith-model/tests/cuda.rs: golden logits, tree vs branch, greedy against the dense
# CPU path) and the product's (crates/draftsmith-cli/tests/cuda.rs: distill, training, eval of
# every method, TokenSwift, on the tiny model).
test-cuda:
    CUDARC_CUDA_VERSION=13000 DRAFTSMITH_REQUIRE_CUDA=1 cargo test --release -p draftsmith-model --features cuda --test cuda -- --nocapture
    CUDARC_CUDA_VERSION=13000 DRAFTSMITH_REQUIRE_CUDA=1 cargo test --release -p draftsmith-cli --features cuda --test cuda

# Decode/prefill/tree-verify benchmark of the target engine.
bench *args="": build
    {{bin}} bench ar {{args}}

# The same benchmark side by side with llama.cpp on the same GGUF and prompts.
bench-vs-llamacpp *args="": build install-llamacpp
    {{bin}} bench ar --vs-llamacpp {{args}}

# Kernel micro-benchmarks: the quantized matmuls, then the host attention alone.
bench-kernels:
    cargo bench -p draftsmith-kernels
    cargo bench -p draftsmith-model --bench attention

# Install llama-cpp-python built for this CPU with explicit SIMD flags (never AMX, whose native
# build crashed; see the script). Compiles llama.cpp: ~13 minutes on 2 cores; kept once built.
install-llamacpp:
    bash scripts/install_llamacpp.sh

# Regenerate the golden logits with the independent numpy reference.
golden:
    pip install gguf numpy tokenizers
    python3 scripts/reference/make_golden.py --model "$({{bin}} fetch {{model}} | tail -n1)" --out tests/golden/smollm2-135m

# Needs `just pipeline`, `just train-tokenswift` and `just context-tasks`; ~20 minutes on 2 cores;
# results under eval/runs/every-method-<time>/ (scripts/every_method.sh).
# Every method against `ar` on this machine, generations taking turns (the README's first table).
every-method: build
    BIN={{bin}} OUT=eval/runs/every-method-$(date -u +%Y%m%d-%H%M%S) bash scripts/every_method.sh

# Context-heavy prompts built from the public-domain texts (n-gram trie evaluation).
context-tasks: build
    python3 scripts/make_context_tasks.py --gutenberg "$({{bin}} fetch gutenberg | tail -n1)" --kjv "$({{bin}} fetch kjv | tail -n1)" --out data/context-tasks.jsonl
