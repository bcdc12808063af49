//! The draft-model proposer, the Post-use token cache and the Pre-cut controller are lossless:
//! greedy speculative decoding with them reproduces greedy autoregressive decoding token for
//! token on tiny random models, whichever drafter (a different random model, or the target
//! itself, whose drafts must then be accepted in full).

mod common;

use common::{ar, repeating_prompt, tiny, tiny_dense, Lcg, B};
use draftsmith_decode::methods::{
    DraftModel, DraftModelConfig, PreCutConfig, PromptLookup, TokenCache, TokenCacheConfig,
};
use draftsmith_decode::spec::policy::NODE_CLASSES;
use draftsmith_decode::spec::DepthStop;
use draftsmith_decode::{
    build_proposer_with, generate_speculative, DraftContext, Drafters, Method, MethodParams, Proposer, SpecOutput,
};
use draftsmith_model::{
    build_model, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig, QFormat,
};

fn spec(model: &Model<B>, prompt: &[u32], n: usize, proposer: &mut dyn Proposer) -> SpecOutput {
    generate_speculative(model, prompt, n, &[], proposer).unwrap()
}

/// The drafter configurations exercised: plain, Pre-cut, reuse at the draft model, both.
fn configs(rng: &mut Lcg, trial: u64) -> Vec<DraftModelConfig> {
    let lambda = 1 + rng.next(8);
    let precut = Some(PreCutConfig { seed: trial, ..PreCutConfig::default() });
    let reuse = Some(TokenCacheConfig::default());
    vec![
        DraftModelConfig { lambda, precut: None, reuse: None, vocab: None, sample: false },
        DraftModelConfig { lambda, precut, reuse: None, vocab: None, sample: false },
        DraftModelConfig { lambda, precut: None, reuse, vocab: None, sample: false },
        DraftModelConfig { lambda, precut, reuse, vocab: None, sample: false },
    ]
}

#[test]
fn draft_model_and_token_cache_equal_autoregressive() {
    let mut rng = Lcg(7);
    let (mut hits, mut accepted) = (0, 0);
    for (arch, seed) in [(Architecture::Llama, 1), (Architecture::Qwen2, 2)] {
        let target = tiny(arch, seed);
        let drafter = tiny(arch, seed + 100);
        let vocab = target.config().vocab_size;
        // One drafter kept across prompts: its cache must follow prompt changes too.
        let mut shared =
            DraftModel::for_target(&target, drafter.clone(), DraftModelConfig { lambda: 5, ..Default::default() })
                .unwrap();
        for trial in 0..4 {
            let prompt = repeating_prompt(&mut rng, vocab);
            let n = 20 + rng.next(30);
            let want = ar(&target, &prompt, n);
            for config in configs(&mut rng, trial) {
                let mut dm = DraftModel::for_target(&target, drafter.clone(), config).unwrap();
                assert_eq!(spec(&target, &prompt, n, &mut dm).tokens, want, "{arch:?} trial {trial}: {config:?}");
                let mut tc =
                    TokenCache::new(DraftModel::new(drafter.clone(), config).unwrap(), TokenCacheConfig::default())
                        .unwrap();
                assert_eq!(
                    spec(&target, &prompt, n, &mut tc).tokens,
                    want,
                    "{arch:?} trial {trial}: token cache + {config:?}"
                );
                hits += tc.stats().hit_tokens;
                accepted += dm.stats().accepted;
            }
            assert_eq!(spec(&target, &prompt, n, &mut shared).tokens, want, "{arch:?} trial {trial}: shared drafter");
            let lookup = PromptLookup::new(1 + rng.next(3), 1, 1 + rng.next(8));
            let mut tc =
                TokenCache::new(lookup, TokenCacheConfig { per_anchor: 1 + rng.next(4), ..Default::default() })
                    .unwrap();
            assert_eq!(
                spec(&target, &prompt, n, &mut tc).tokens,
                want,
                "{arch:?} trial {trial}: token cache + prompt lookup"
            );
            hits += tc.stats().hit_tokens;
        }
    }
    assert!(hits > 0, "cached phrases were accepted sometimes");
    assert!(accepted > 0, "the other random model's drafts were accepted sometimes");
}

#[test]
fn the_target_as_its_own_drafter_is_accepted_in_full() {
    let mut rng = Lcg(11);
    let (mut reused, mut cut) = (0, 0);
    for (arch, seed) in [(Architecture::Llama, 3), (Architecture::Qwen2, 4)] {
        let target = tiny(arch, seed);
        let vocab = target.config().vocab_size;
        for trial in 0..3 {
            let prompt = repeating_prompt(&mut rng, vocab);
            let n = 30 + rng.next(30);
            let want = ar(&target, &prompt, n);
            for config in configs(&mut rng, trial) {
                let mut dm = DraftModel::new(target.clone(), config).unwrap();
                let out = spec(&target, &prompt, n, &mut dm);
                assert_eq!(out.tokens, want, "{arch:?} trial {trial}: {config:?}");
                for (i, step) in out.steps.iter().enumerate() {
                    assert_eq!(step.accepted, step.tree_size, "{arch:?} trial {trial} step {i}: {config:?}");
                    assert_eq!(step.drafted, step.tree_size, "the drafter generated the whole chain");
                    if config.precut.is_none() && config.reuse.is_none() && i > 0 {
                        assert_eq!(
                            step.draft_calls, step.tree_size,
                            "one call per drafted token (the first feeds the last bonus token)"
                        );
                    }
                }
                assert_eq!(
                    out.steps.iter().map(|s| s.draft_calls).sum::<usize>(),
                    dm.stats().calls,
                    "every drafter call is counted in a step"
                );
                if config.precut.is_none() {
                    // λ tokens per step plus the bonus, except where the length limit cuts.
                    let full = out.steps.iter().filter(|s| s.tree_size == config.lambda).count();
                    assert!(full + 1 >= out.steps.len(), "{arch:?} trial {trial}: {config:?}");
                }
                let stats = dm.stats();
                assert_eq!(stats.accepted, stats.drafted);
                assert!(stats.reused <= stats.phrase_rows, "a reused token was fed as a phrase row first");
                let extras: std::collections::HashMap<_, _> = dm.extra_stats().into_iter().collect();
                let matched = 100.0 * stats.reused as f64 / stats.phrase_rows.max(1) as f64;
                assert_eq!(extras.get("drafter_phrase_rows_matched_pct").copied(), config.reuse.map(|_| matched));
                reused += stats.reused;
                cut += out.steps.iter().filter(|s| s.tree_size < config.lambda).count();
            }
        }
    }
    assert!(reused > 0, "draft-side reuse produced tokens from cached phrases");
    assert!(cut > 0, "Pre-cut stopped some drafts early");
}

#[test]
fn a_draft_vocabulary_drafts_only_its_ids_and_stays_lossless() {
    let mut rng = Lcg(23);
    let mut drafted_total = 0;
    for (arch, seed) in [(Architecture::Llama, 6), (Architecture::Qwen2, 7)] {
        for target in [tiny(arch, seed), tiny_dense(arch, seed)] {
            let vocab = target.config().vocab_size;
            let n_ids = vocab / 2;
            for trial in 0..3 {
                let prompt = repeating_prompt(&mut rng, vocab);
                let n = 20 + rng.next(30);
                let want = ar(&target, &prompt, n);
                for config in configs(&mut rng, trial) {
                    let config = DraftModelConfig { vocab: Some(n_ids), ..config };
                    // The target drafting for itself: its drafts differ from its own greedy
                    // tokens exactly where those lie outside the draft vocabulary.
                    let mut dm = DraftModel::new(target.clone(), config).unwrap();
                    let out = spec(&target, &prompt, n, &mut dm);
                    assert_eq!(out.tokens, want, "{arch:?} trial {trial}: {config:?}");
                    let stats = dm.stats();
                    assert!(stats.accepted <= stats.drafted);
                    drafted_total += stats.drafted;
                    let mut tc =
                        TokenCache::new(DraftModel::new(target.clone(), config).unwrap(), TokenCacheConfig::default())
                            .unwrap();
                    assert_eq!(spec(&target, &prompt, n, &mut tc).tokens, want, "token cache + {config:?}");
                }
            }
            // A full-size draft vocabulary is the whole head.
            let config = DraftModelConfig { lambda: 3, vocab: Some(vocab + 5), ..Default::default() };
            let prompt = repeating_prompt(&mut rng, vocab);
            let mut dm = DraftModel::new(target.clone(), config).unwrap();
            let out = spec(&target, &prompt, 24, &mut dm);
            assert!(out.steps.iter().all(|s| s.accepted == s.tree_size), "{arch:?}: the target drafting itself");
        }
    }
    assert!(drafted_total > 0);
    let err = DraftModel::new(tiny(Architecture::Llama, 1), DraftModelConfig { vocab: Some(0), ..Default::default() });
    assert!(err.is_err_and(|e| e.to_string().contains("draft_vocab")));
}

#[test]
fn a_drafter_re_quantized_to_four_bits_stays_lossless_and_its_draft_head_keeps_the_format() {
    let mut rng = Lcg(31);
    let mut accepted = 0;
    for (arch, seed) in [(Architecture::Llama, 8), (Architecture::Qwen2, 9)] {
        let target = tiny(arch, seed);
        let config = ModelConfig::tiny(arch);
        // The target's own weights at 4 bits (`--draft-weights q4_0`).
        let options = LoadOptions::new(MatmulWeights::Quantized).with_requantize(Some(QFormat::Q4_0));
        let drafter =
            build_model::<B>(&config, &MemorySource::random(&config, seed), options, &Default::default()).unwrap();
        assert_eq!((target.lm_head_format(), drafter.lm_head_format()), (Some(QFormat::Q8_0), Some(QFormat::Q4_0)));
        let vocab = config.vocab_size;
        for trial in 0..3 {
            let prompt = repeating_prompt(&mut rng, vocab);
            let want = ar(&target, &prompt, 30);
            let dm_config = DraftModelConfig { lambda: 4, vocab: Some(vocab / 2), ..Default::default() };
            let mut dm = DraftModel::new(drafter.clone(), dm_config).unwrap();
            assert_eq!(spec(&target, &prompt, 30, &mut dm).tokens, want, "{arch:?} trial {trial}");
            accepted += dm.stats().accepted;
        }
    }
    assert!(accepted > 0, "the target's weights at 4 bits draft some of its tokens");
}

#[test]
fn drafts_from_a_draft_vocabulary_lie_inside_it() {
    let target = tiny(Architecture::Qwen2, 8);
    let vocab = target.config().vocab_size;
    let mut rng = Lcg(29);
    let n_ids = vocab / 4;
    let config = DraftModelConfig { lambda: 4, vocab: Some(n_ids), ..Default::default() };
    let mut dm = DraftModel::new(target.clone(), config).unwrap();
    let mut seen = 0;
    for _ in 0..6 {
        let mut context = repeating_prompt(&mut rng, vocab);
        for _ in 0..5 {
            let tree = dm
                .propose(&DraftContext { tokens: &context, prompt_len: 1, hidden: None, target_cache: None })
                .unwrap();
            assert!(tree.tokens().iter().all(|&t| (t as usize) < n_ids), "{:?}", tree.tokens());
            seen += tree.len();
            context.push(rng.next(vocab) as u32);
        }
    }
    assert!(seen > 0);
}

#[test]
fn every_drafter_method_of_the_registry_equals_autoregressive() {
    let mut rng = Lcg(19);
    let target = tiny(Architecture::Qwen2, 5);
    let drafter = tiny(Architecture::Qwen2, 105);
    let drafters = Drafters { draft_model: Some(&drafter), redrafter: None, tokenswift: None };
    let vocab = target.config().vocab_size;
    for trial in 0..3 {
        let prompt = repeating_prompt(&mut rng, vocab);
        let n = 24 + rng.next(24);
        let want = ar(&target, &prompt, n);
        let params =
            MethodParams { draft_len: 1 + rng.next(8), draft_model: Some("tiny".into()), ..MethodParams::default() };
        for name in Method::ALL.into_iter().filter(|m| m.uses_draft_model() || *m == Method::TokenCache) {
            let mut proposer = build_proposer_with(name, &params, &target, drafters).unwrap().expect("a proposer");
            let out = spec(&target, &prompt, n, proposer.as_mut());
            assert_eq!(out.tokens, want, "{name}, trial {trial}, λ = {}", params.draft_len);
            assert!(
                out.steps.iter().all(|s| s.drafted <= params.draft_len && (s.draft_calls >= 1 || s.tree_size == 0)),
                "{name}: at most λ generated, at least one drafter call per drafted step (the `auto` policy's \
                 plain steps call none)"
            );
        }
    }
}

#[test]
fn the_policys_depth_rule_bounds_a_pre_cut_draft() {
    // Pre-cut starts out drafting to λ (its Q-table prefers CONTINUE until it has learned);
    // under the draft policy a rule that never pays for another level stops the draft after
    // its first token: the policy bounds the depth, Pre-cut may only stop earlier.
    let target = tiny(Architecture::Llama, 3);
    let drafter = tiny(Architecture::Llama, 103);
    let precut = Some(PreCutConfig { epsilon: 0.0, ..PreCutConfig::default() });
    let config = DraftModelConfig { lambda: 5, precut, reuse: None, vocab: None, sample: false };
    let prompt: Vec<u32> = (1..10).collect();
    let ctx = DraftContext { tokens: &prompt, prompt_len: prompt.len(), hidden: None, target_cache: None };
    let mut free = DraftModel::for_target(&target, drafter.clone(), config).unwrap();
    assert_eq!(free.propose(&ctx).unwrap().len(), 5);
    let mut bounded = DraftModel::for_target(&target, drafter, config).unwrap();
    let never = DepthStop::new(vec![[0.0; NODE_CLASSES]; 5], vec![0.0; 5], |_| 1.0, |d| 1.0 + d as f64);
    assert!(bounded.set_depth_stop(never), "a Pre-cut draft model takes the policy's rule too");
    assert_eq!(bounded.propose(&ctx).unwrap().len(), 1);
}

#[test]
fn a_drafters_lag_is_the_tokens_it_has_not_fed() {
    let target = tiny(Architecture::Llama, 5);
    let vocab = target.config().vocab_size;
    let mut rng = Lcg(31);
    let prompt: Vec<u32> = (0..10).map(|_| rng.next(vocab) as u32).collect();
    fn at(tokens: &[u32]) -> DraftContext<'_> {
        DraftContext { tokens, prompt_len: 10, hidden: None, target_cache: None }
    }
    let mut dm = DraftModel::new(target, DraftModelConfig { lambda: 3, ..Default::default() }).unwrap();
    assert_eq!(dm.lag(&at(&prompt)), prompt.len(), "a new drafter has seen nothing");
    let draft = dm.propose(&at(&prompt)).unwrap();
    assert_eq!(draft.len(), 3);
    // Its first two tokens accepted, then the target's bonus token: the drafter fed the prompt
    // and the first two drafted tokens (the third was drafted, never fed).
    let mut tokens: Vec<u32> = prompt.iter().chain(&draft.tokens()[..2]).copied().collect();
    tokens.push((draft.tokens()[2] + 1) % vocab as u32);
    assert_eq!(dm.lag(&at(&tokens)), 1);
    tokens.extend([1, 2, 3, 4, 5]);
    assert_eq!(dm.lag(&at(&tokens)), 6, "five plain steps later");
    let other: Vec<u32> = prompt[..4].iter().copied().chain([7, 7, 7]).collect();
    assert_eq!(dm.lag(&at(&other)), 3, "another prompt sharing the first four tokens");
}
