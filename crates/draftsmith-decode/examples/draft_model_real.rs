//! Real-model check of the draft-model methods: Qwen2.5-Coder 1.5B (target) drafted by 0.5B
//! (same tokenizer), greedy, on two HumanEval-like prompts. Asserts ids == AR and prints
//! tokens/step and timings.
//!
//! `cargo run --release -p draftsmith-decode --example draft_model_real [target.gguf draft.gguf]`

use std::path::PathBuf;
use std::time::Duration;

use burn::backend::Flex;
use draftsmith_decode::methods::{
    check_tokenizers, DraftModel, DraftModelConfig, PreCutConfig, TokenCache, TokenCacheConfig,
};
use draftsmith_decode::{generate, generate_speculative, Proposer, Sampler, SamplingConfig};
use draftsmith_model::{load_model, LoadOptions, MatmulWeights, Model};

type B = Flex;

const PROMPTS: [&str; 2] = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n    \"\"\" Check if in given list of numbers, are any two numbers closer to each other than\n    given threshold.\n    \"\"\"\n",
];
const NEW_TOKENS: usize = 64;
const LAMBDA: usize = 4;

fn model_path(arg: Option<String>, default: &str) -> PathBuf {
    arg.map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/draftsmith/models").join(default)
    })
}

fn ms_per_token(d: Duration, tokens: usize) -> f64 {
    d.as_secs_f64() * 1e3 / tokens.saturating_sub(1).max(1) as f64
}

fn run(
    name: &str,
    target: &Model<B>,
    prompt: &[u32],
    stop: &[u32],
    want: &[u32],
    ar_ms: f64,
    proposer: &mut dyn Proposer,
) {
    let out = generate_speculative(target, prompt, NEW_TOKENS, stop, proposer).expect("speculative generation");
    assert_eq!(out.tokens, want, "{name}: ids differ from AR");
    let steps = out.steps.len();
    let tau = (out.tokens.len() - 1) as f64 / steps as f64;
    let draft_ms: f64 = out.steps.iter().map(|s| s.draft_ms).sum();
    let verify_ms: f64 = out.steps.iter().map(|s| s.verify_ms).sum();
    let drafted: usize = out.steps.iter().map(|s| s.tree_size).sum();
    let accepted: usize = out.steps.iter().map(|s| s.accepted).sum();
    let ms = ms_per_token(out.decode, out.tokens.len());
    println!(
        "  {name:<34} ids==AR  steps {steps:>3}  tokens/step {tau:.2}  accepted {accepted}/{drafted} nodes  draft {draft_ms:.0} ms  verify {verify_ms:.0} ms  decode {:.0} ms  {ms:.1} ms/token  speedup {:.2}x",
        out.decode.as_secs_f64() * 1e3,
        ar_ms / ms
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let target_path = model_path(args.next(), "qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct.gguf");
    let draft_path = model_path(args.next(), "qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct.gguf");
    let options = LoadOptions::new(MatmulWeights::Quantized);
    let target = load_model::<B>(&target_path, options, &Default::default()).expect("target");
    let draft = load_model::<B>(&draft_path, options, &Default::default()).expect("drafter");
    check_tokenizers(&target.tokenizer, &draft.tokenizer).expect("same tokenizer");
    let stop = target.tokenizer.eos_ids().to_vec();
    let dm =
        |config: DraftModelConfig| DraftModel::for_target(&target.model, draft.model.clone(), config).expect("drafter");
    for text in PROMPTS {
        let prompt = target.tokenizer.encode(text).expect("encode");
        let ar = generate(
            &target.model,
            &prompt,
            NEW_TOKENS,
            &stop,
            &mut Sampler::new(SamplingConfig::default()),
            &mut |_| true,
        )
        .expect("AR");
        let ar_ms = ms_per_token(ar.decode, ar.tokens.len());
        println!(
            "prompt {:?} ({} tokens): AR {} tokens, prefill {:.0} ms, decode {:.0} ms, {ar_ms:.1} ms/token",
            text.lines().next().unwrap_or(""),
            prompt.len(),
            ar.tokens.len(),
            ar.prefill.as_secs_f64() * 1e3,
            ar.decode.as_secs_f64() * 1e3
        );
        let plain = DraftModelConfig { lambda: LAMBDA, precut: None, reuse: None, vocab: None, sample: false };
        let mut p = dm(plain);
        run("draft-model λ=4", &target.model, &prompt, &stop, &ar.tokens, ar_ms, &mut p);
        let mut p = dm(DraftModelConfig { reuse: Some(TokenCacheConfig::default()), ..plain });
        run("draft-model λ=4 + reuse at Md", &target.model, &prompt, &stop, &ar.tokens, ar_ms, &mut p);
        println!("    drafter stats {:?}", p.stats());
        let mut p = TokenCache::new(dm(plain), TokenCacheConfig::default()).expect("token cache");
        run("token-cache(draft-model λ=4)", &target.model, &prompt, &stop, &ar.tokens, ar_ms, &mut p);
        println!("    cache stats {:?}", p.stats());
        let full = DraftModelConfig {
            lambda: 8,
            precut: Some(PreCutConfig::default()),
            reuse: Some(TokenCacheConfig::default()),
            vocab: None,
            sample: false,
        };
        let mut p = TokenCache::new(dm(full), TokenCacheConfig::default()).expect("token cache");
        run("post-use+pre-cut (λ≤8)", &target.model, &prompt, &stop, &ar.tokens, ar_ms, &mut p);
        println!("    cache stats {:?}, drafter stats {:?}", p.stats(), p.inner().stats());
        println!("    text: {:?}", target.tokenizer.decode(&ar.tokens).unwrap_or_default());
    }
}
