//! TokenSwift decoding on tiny random models: greedy output equals autoregressive decoding for
//! every KV mode (with budgets small enough that partial caches and re-selections happen, and
//! `verify-pass`, which drafts from the verification pass's own states), with and without n-gram
//! reuse and with a contextual penalty; in `full` mode the draft forward sees exactly the
//! target's cache, so p0's top token (depth 1) is always accepted.

mod common;

use common::{ar, repeating_prompt, tiny, Lcg, B};
use draftsmith_decode::methods::{KvMode, LoadedTokenSwift, TokenSwiftProposer, TokenSwiftSettings};
use draftsmith_decode::{
    generate, generate_speculative, generate_speculative_sampled, Proposer, Sampler, SamplingConfig,
};
use draftsmith_heads::tokenswift::{TokenSwiftConfig, TokenSwiftFile};
use draftsmith_model::{Architecture, Model};

fn loaded(model: &Model<B>, seed: u64) -> LoadedTokenSwift<B> {
    let c = model.config();
    let cfg = TokenSwiftConfig::new(c.vocab_size, c.hidden_size).with_num_heads(3);
    let file = TokenSwiftFile {
        drafter: "tokenswift".into(),
        vocab_size: c.vocab_size,
        hidden_size: c.hidden_size,
        num_heads: 3,
        rms_norm_eps: 1e-6,
        target: None,
        training: serde_json::Value::Null,
    };
    LoadedTokenSwift { heads: cfg.init::<B>(&Default::default(), seed), file }
}

#[test]
fn greedy_tokenswift_equals_autoregressive_in_every_mode() {
    let mut rng = Lcg(23);
    let (mut reselections, mut ngram_hits) = (0, 0);
    for (arch, seed) in [(Architecture::Llama, 31), (Architecture::Qwen2, 32)] {
        let model = tiny(arch, seed);
        let heads = loaded(&model, seed);
        let vocab = model.config().vocab_size;
        for trial in 0..3 {
            let prompt = repeating_prompt(&mut rng, vocab);
            let n = 30 + rng.next(30);
            let want = ar(&model, &prompt, n);
            for mode in [KvMode::Full, KvMode::PartialStatic, KvMode::Dynamic, KvMode::VerifyPass] {
                for ngram_topk in [0, 20] {
                    let settings = TokenSwiftSettings {
                        kv_mode: mode,
                        kv_budget: 10,
                        kv_sinks: 2,
                        ngram_topk,
                        ..TokenSwiftSettings::default()
                    };
                    let mut p = TokenSwiftProposer::new(&model, &heads, settings).unwrap();
                    let out = generate_speculative(&model, &prompt, n, &[], &mut p).unwrap();
                    assert_eq!(out.tokens, want, "{arch:?} trial {trial} {mode} k={ngram_topk}");
                    if mode == KvMode::Full {
                        assert!(
                            out.steps.iter().all(|s| s.accepted >= 1 || s.emitted < 2),
                            "{arch:?} {mode}: p0's top token is the target's own"
                        );
                    }
                    let stats = p.stats();
                    reselections += stats.reselections;
                    ngram_hits += stats.ngram_steps;
                    assert_eq!(stats.steps, out.steps.len());
                    // The [1,3,3,3] tree has 40 nodes; drafted from the verification pass, its
                    // heads' [3,3,3] levels 39.
                    let nodes = if mode == KvMode::VerifyPass { 39 } else { 40 };
                    assert!(
                        out.steps.iter().all(|s| s.tree_size >= nodes || s.emitted == 0),
                        "{mode}: a tree of at least {nodes} nodes"
                    );
                    assert_eq!(p.wants_target_cache(), mode != KvMode::VerifyPass);
                }
            }
        }
    }
    assert!(reselections > 0, "partial caches were selected");
    assert!(ngram_hits > 0, "n-gram continuations were accepted sometimes");
}

#[test]
fn penalized_tokenswift_equals_penalized_autoregressive() {
    let model = tiny(Architecture::Qwen2, 41);
    let heads = loaded(&model, 2);
    let mut rng = Lcg(5);
    let prompt = repeating_prompt(&mut rng, model.config().vocab_size);
    let cfg = SamplingConfig { repetition_penalty: 1.2, penalty_window: 8, ..Default::default() };
    let want = generate(&model, &prompt, 40, &[], &mut Sampler::new(cfg.clone()), &mut |_| true).unwrap().tokens;
    for kv_mode in [KvMode::Dynamic, KvMode::VerifyPass] {
        let settings = TokenSwiftSettings { kv_budget: 12, kv_sinks: 2, kv_mode, ..TokenSwiftSettings::default() };
        let mut p = TokenSwiftProposer::new(&model, &heads, settings).unwrap();
        let got =
            generate_speculative_sampled(&model, &prompt, 40, &[], &mut p, &mut Sampler::new(cfg.clone())).unwrap();
        assert_eq!(got.tokens, want, "{kv_mode}");
        assert_eq!((p.settings().penalty, p.settings().penalty_window), (1.2, 8), "drafts follow the target's penalty");
    }
    // One proposer across prompts: a new prompt resets its caches and n-gram table.
    let other: Vec<u32> = prompt.iter().rev().copied().collect();
    let want = ar(&model, &other, 30);
    let plain = TokenSwiftSettings { kv_budget: 12, kv_sinks: 2, ..TokenSwiftSettings::default() };
    let mut p = TokenSwiftProposer::new(&model, &heads, plain).unwrap();
    generate_speculative(&model, &prompt, 30, &[], &mut p).unwrap();
    assert_eq!(generate_speculative(&model, &other, 30, &[], &mut p).unwrap().tokens, want);
    assert_eq!(p.name(), "tokenswift");
}

#[test]
fn bad_settings_are_refused() {
    let model = tiny(Architecture::Llama, 1);
    let heads = loaded(&model, 1);
    for (settings, what) in [
        (TokenSwiftSettings { tree: vec![1, 3, 3], ..Default::default() }, "tree"),
        (TokenSwiftSettings { tree: vec![1, 0, 3, 3], ..Default::default() }, "tree"),
        (TokenSwiftSettings { kv_budget: 8, kv_sinks: 16, ..Default::default() }, "kv_budget"),
    ] {
        let err = TokenSwiftProposer::new(&model, &heads, settings).err().expect("refused").to_string();
        assert!(err.contains(what), "{err}");
    }
}

#[test]
fn verify_pass_with_long_copies_equals_autoregressive_and_skips_the_heads_when_copies_agree() {
    // `auto`'s verify-pass settings: continuations of up to 7 tokens after the last 3, the heads
    // not run when every counted continuation agrees.
    let mut rng = Lcg(7);
    let mut without_calls = 0;
    for (arch, seed) in [(Architecture::Llama, 51), (Architecture::Qwen2, 52)] {
        let model = tiny(arch, seed);
        let heads = loaded(&model, seed);
        let prompt = repeating_prompt(&mut rng, model.config().vocab_size);
        let want = ar(&model, &prompt, 60);
        let settings = TokenSwiftSettings {
            kv_mode: KvMode::VerifyPass,
            ngram_n: 10,
            ngram_key: 3,
            skip_heads_on_agreement: true,
            ..TokenSwiftSettings::default()
        };
        let mut p = TokenSwiftProposer::new(&model, &heads, settings).unwrap();
        let out = generate_speculative(&model, &prompt, 60, &[], &mut p).unwrap();
        assert_eq!(out.tokens, want, "{arch:?}");
        without_calls += out.steps.iter().filter(|s| s.draft_calls == 0).count();
    }
    assert!(without_calls > 0, "some steps drafted agreeing copies alone");
    // The key must leave room for a continuation.
    let model = tiny(Architecture::Llama, 1);
    let heads = loaded(&model, 1);
    let settings = TokenSwiftSettings { ngram_key: 4, ..TokenSwiftSettings::default() };
    let err = TokenSwiftProposer::new(&model, &heads, settings).err().expect("refused").to_string();
    assert!(err.contains("ngram_key"), "{err}");
}
