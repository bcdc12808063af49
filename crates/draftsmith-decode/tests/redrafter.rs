//! `redrafter` on a tiny random target: a drafter trained for a few hundred steps on the
//! target's own continuations gets drafts accepted, and every beam shape, with and without
//! tree attention, produces exactly the autoregressive greedy ids.

mod common;

use burn::backend::Autodiff;
use common::{ar, tiny, tiny_dense, Lcg, B};
use draftsmith_decode::methods::{LoadedReDrafter, ReDrafterProposer, ReDrafterSettings};
use draftsmith_decode::{
    build_proposer_with, check_drafters, generate_speculative, DraftContext, Drafters, HiddenState, Method,
    MethodParams, Proposer,
};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::{Architecture, Model};
use draftsmith_train::{train_redrafter, ReDrafterTrainConfig, Sequence};

fn identity(model: &Model<B>) -> TargetIdentity {
    TargetIdentity {
        name: "tiny".into(),
        sha256: "11".repeat(32),
        vocab_size: model.config().vocab_size,
        hidden_size: model.config().hidden_size,
    }
}

/// Trains a drafter on 30 greedy continuations of the target and returns its directory.
fn trained_drafter(model: &Model<B>, name: &str) -> std::path::PathBuf {
    trained_drafter_with(model, name, ReDrafterTrainConfig::default().draft_vocab)
}

fn trained_drafter_with(model: &Model<B>, name: &str, draft_vocab: usize) -> std::path::PathBuf {
    let mut rng = Lcg(99);
    let seqs: Vec<Sequence> = (0..30)
        .map(|_| {
            let prompt: Vec<u32> = (0..4).map(|_| rng.next(48) as u32).collect();
            let mut tokens = prompt.clone();
            tokens.extend(ar(model, &prompt, 24));
            let loss_mask = (0..tokens.len()).map(|i| i >= prompt.len()).collect();
            Sequence { tokens, loss_mask, teacher: None, teacher_len: 0 }
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("draftsmith-decode-redrafter-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = ReDrafterTrainConfig {
        horizon: 4,
        epochs: 40,
        batch_size: 64,
        lr: 3e-3,
        val_fraction: 0.0,
        draft_vocab,
        ..Default::default()
    };
    train_redrafter::<Autodiff<B>>(
        model,
        &identity(model),
        &seqs,
        &cfg,
        &dir,
        serde_json::Value::Null,
        None,
        &mut |_| {},
    )
    .unwrap();
    dir
}

#[test]
fn redrafter_is_lossless_for_every_beam_shape_and_gets_drafts_accepted() {
    let model = tiny(Architecture::Llama, 3);
    let dir = trained_drafter(&model, "lossless");
    let loaded = LoadedReDrafter::<B>::load(&dir, &identity(&model), &Default::default()).unwrap();
    let mut rng = Lcg(5);
    let mut accepted = 0;
    for case in 0..6 {
        let prompt: Vec<u32> = (0..3 + rng.next(6)).map(|_| rng.next(48) as u32).collect();
        let expected = ar(&model, &prompt, 24);
        for (width, length) in [(1, 5), (2, 3), (4, 4), (8, 2)] {
            for tree_attention in [true, false] {
                let settings = ReDrafterSettings { beam_width: width, beam_length: length, tree_attention };
                let mut proposer = ReDrafterProposer::new(&model, &loaded, settings).unwrap();
                assert!(proposer.drafts_on_host(), "a quantized target's drafter runs on its host kernels");
                let out = generate_speculative(&model, &prompt, 24, &[], &mut proposer).unwrap();
                assert_eq!(
                    out.tokens, expected,
                    "case {case}: width {width} length {length} tree attention {tree_attention}"
                );
                accepted += out.steps.iter().map(|s| s.accepted).sum::<usize>();
                assert!(out.steps.iter().all(|s| s.tree_size <= width * (length - 1)));
                // A draft policy's depth limit shortens the beams of the next proposal only.
                let mut limited = ReDrafterProposer::new(&model, &loaded, settings).unwrap();
                let mut steps = 0;
                let out = draftsmith_decode::generate_speculative_with(
                    &model,
                    &prompt,
                    24,
                    &[],
                    &mut DepthOne(&mut limited),
                    &mut draftsmith_decode::Sampler::new(Default::default()),
                    &mut |v| {
                        steps += 1;
                        v.step.tree_size <= width
                    },
                )
                .unwrap();
                assert_eq!(out.stop, draftsmith_decode::StopReason::MaxTokens, "case {case}: depth-1 drafts only");
                assert_eq!(out.tokens, expected, "case {case}: depth-limited, width {width} length {length}");
                assert!(steps > 0);
                if tree_attention && width > 1 {
                    assert!(proposer.packing.packed_tokens <= proposer.packing.unpacked_tokens);
                }
            }
        }
    }
    assert!(accepted > 100, "a trained drafter gets drafts accepted (accepted {accepted})");
    // On a dense target the same drafter drafts through burn (f32 weights), also losslessly and
    // with drafts accepted.
    let dense = tiny_dense(Architecture::Llama, 3);
    let settings = ReDrafterSettings { beam_width: 2, beam_length: 4, tree_attention: true };
    let mut accepted = 0;
    for case in 0..3 {
        let prompt: Vec<u32> = (0..3 + rng.next(6)).map(|_| rng.next(48) as u32).collect();
        let mut proposer = ReDrafterProposer::new(&dense, &loaded, settings).unwrap();
        assert!(!proposer.drafts_on_host());
        let out = generate_speculative(&dense, &prompt, 24, &[], &mut proposer).unwrap();
        assert_eq!(out.tokens, ar(&dense, &prompt, 24), "dense case {case}");
        accepted += out.steps.iter().map(|s| s.accepted).sum::<usize>();
    }
    assert!(accepted > 0, "the burn drafter gets drafts accepted on the dense target");
}

#[test]
fn a_drafter_for_another_target_or_bad_beams_are_refused() {
    let model = tiny(Architecture::Llama, 3);
    let dir = trained_drafter(&model, "refused");
    let mut other = identity(&model);
    other.sha256 = "22".repeat(32);
    let err = LoadedReDrafter::<B>::load(&dir, &other, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("trained for target") && err.contains("config.json"), "{err}");
    let loaded = LoadedReDrafter::<B>::load(&dir, &identity(&model), &Default::default()).unwrap();
    let drafters = Drafters { draft_model: None, redrafter: Some(&loaded), tokenswift: None };
    let params = MethodParams { drafter: Some(dir.display().to_string()), beam_length: 1, ..MethodParams::default() };
    let err = build_proposer_with(Method::ReDrafter, &params, &model, drafters).err().unwrap().to_string();
    assert!(err.contains("beam_length"), "{err}");
    let err =
        build_proposer_with(Method::ReDrafter, &MethodParams::default(), &model, drafters).err().unwrap().to_string();
    assert!(err.contains("--drafter"), "{err}");
    let params = MethodParams { drafter: Some(dir.display().to_string()), ..MethodParams::default() };
    assert!(build_proposer_with(Method::ReDrafter, &params, &model, drafters).unwrap().is_some());
}

#[test]
fn a_drafter_with_a_draft_vocabulary_proposes_only_from_it_and_stays_lossless() {
    let model = tiny(Architecture::Qwen2, 4);
    let dir = trained_drafter_with(&model, "draft-vocab", 8);
    let loaded = LoadedReDrafter::<B>::load(&dir, &identity(&model), &Default::default()).unwrap();
    let allowed = loaded.file.draft_vocab.clone().expect("trained with a draft vocabulary");
    assert_eq!(allowed.len(), 8);
    let mut rng = Lcg(6);
    let mut accepted = 0;
    for _ in 0..4 {
        let prompt: Vec<u32> = (0..3 + rng.next(6)).map(|_| rng.next(48) as u32).collect();
        let expected = ar(&model, &prompt, 24);
        let settings = ReDrafterSettings { beam_width: 4, beam_length: 4, tree_attention: true };
        let inner = ReDrafterProposer::new(&model, &loaded, settings).unwrap();
        let mut proposer = Recording { inner, drafted: Vec::new(), classes: Vec::new() };
        let out = generate_speculative(&model, &prompt, 24, &[], &mut proposer).unwrap();
        assert_eq!(out.tokens, expected);
        accepted += out.steps.iter().map(|s| s.accepted).sum::<usize>();
        assert!(!proposer.drafted.is_empty());
        assert!(
            proposer.drafted.iter().all(|t| allowed.contains(t)),
            "drafted {:?} outside {allowed:?}",
            proposer.drafted
        );
        // One class per drafted node, from the drafter's probability of it.
        assert_eq!(proposer.classes.len(), proposer.drafted.len());
        assert!(proposer.classes.iter().all(|&c| c < draftsmith_decode::spec::policy::NODE_CLASSES));
    }
    assert!(accepted > 0, "the drafter gets drafts accepted");

    // At most one beam per draft-vocabulary token: refused by the check an eval and a recipe's
    // dry run make before decoding (the drafter's own vocabulary, whatever a recipe asked for),
    // and by the constructor.
    let drafters = Drafters { draft_model: None, redrafter: Some(&loaded), tokenswift: None };
    let wide = MethodParams { beam_width: 9, ..MethodParams::default() };
    let err = check_drafters(Method::ReDrafter, &wide, drafters).unwrap_err().to_string();
    assert!(err.contains("beam_width") && err.contains("draft vocabulary, 8"), "{err}");
    check_drafters(Method::ReDrafter, &MethodParams { beam_width: 8, ..MethodParams::default() }, drafters).unwrap();
    let settings = ReDrafterSettings { beam_width: 9, beam_length: 4, tree_attention: true };
    assert!(ReDrafterProposer::new(&model, &loaded, settings).is_err());
}

#[test]
fn the_copied_continuation_beside_the_beams_is_classed_apart_and_stays_lossless() {
    use draftsmith_decode::methods::{CopyContext, WithCopy};
    use draftsmith_decode::spec::policy::{COPIED, NODE_CLASSES};
    let model = tiny(Architecture::Llama, 3);
    let dir = trained_drafter(&model, "copy");
    let loaded = LoadedReDrafter::<B>::load(&dir, &identity(&model), &Default::default()).unwrap();
    let mut rng = Lcg(11);
    let (mut copied, mut accepted_copies, mut copied_accepted) = (0, 0, 0);
    for case in 0..4 {
        // A prompt that repeats its own start, so that prompt lookup finds a continuation.
        let start: Vec<u32> = (0..4).map(|_| rng.next(48) as u32).collect();
        let mut prompt = start.clone();
        prompt.extend(ar(&model, &start, 12));
        prompt.extend(&start);
        let expected = ar(&model, &prompt, 24);
        for (width, length) in [(1, 5), (4, 4)] {
            let settings = ReDrafterSettings { beam_width: width, beam_length: length, tree_attention: true };
            let beams = ReDrafterProposer::new(&model, &loaded, settings).unwrap();
            let inner = WithCopy::new(Box::new(beams), CopyContext { max_ngram: 3, len: 6 });
            let mut proposer = Recording { inner, drafted: Vec::new(), classes: Vec::new() };
            let out = generate_speculative(&model, &prompt, 24, &[], &mut proposer).unwrap();
            assert_eq!(out.tokens, expected, "case {case}: width {width} length {length}");
            assert!(out.steps.iter().all(|s| s.tree_size <= width * (length - 1) + 6));
            assert_eq!(proposer.classes.len(), proposer.drafted.len(), "one class per node");
            assert!(proposer.classes.iter().all(|&c| c < NODE_CLASSES));
            copied += proposer.classes.iter().filter(|&&c| c >= COPIED).count();
            accepted_copies += out.steps.iter().filter(|s| s.tree_size > width * (length - 1)).count();
            // The copy's share of the accepted tokens, as `eval` reports it.
            let stats = proposer.inner.stats();
            let drafted_steps: Vec<_> = out.steps.iter().filter(|s| s.tree_size > 0).collect();
            assert_eq!(stats.steps, drafted_steps.len());
            assert_eq!(stats.accepted, drafted_steps.iter().map(|s| s.accepted).sum::<usize>());
            assert!(stats.copied_accepted <= stats.accepted && stats.copy_steps <= stats.steps);
            let names: Vec<_> = proposer.inner.extra_stats().into_iter().map(|(k, _)| k).collect();
            assert!(names.ends_with(&["copy_accepted_pct", "copy_steps_pct"]), "{names:?}");
            copied_accepted += stats.copied_accepted;
        }
    }
    assert!(copied > 0, "the context's continuation is drafted beside the beams");
    assert!(accepted_copies > 0, "some trees hold more nodes than the beams alone");
    assert!(copied_accepted > 0, "the target accepts tokens only the copy drafted");
}

/// Keeps every token a proposer drafts, with the node class it gave each.
struct Recording<P> {
    inner: P,
    drafted: Vec<u32>,
    classes: Vec<usize>,
}

impl<P: draftsmith_decode::Proposer> draftsmith_decode::Proposer for Recording<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn draft_len(&self) -> Option<usize> {
        self.inner.draft_len()
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        self.inner.wants_hidden()
    }

    fn last_cost(&self) -> Option<draftsmith_decode::DraftCost> {
        self.inner.last_cost()
    }

    fn propose(
        &mut self,
        ctx: &draftsmith_decode::DraftContext<'_>,
    ) -> Result<draftsmith_core::DraftTree, draftsmith_decode::DecodeError> {
        let tree = self.inner.propose(ctx)?;
        self.drafted.extend(tree.tokens());
        self.classes.extend(self.inner.node_classes(&tree).expect("ReDrafter classes its nodes"));
        Ok(tree)
    }

    fn observe_verified(
        &mut self,
        ctx: &draftsmith_decode::DraftContext<'_>,
        tree: &draftsmith_core::DraftTree,
        verified: &draftsmith_decode::spec::Verified<'_>,
    ) {
        self.inner.observe_verified(ctx, tree, verified);
    }
}

/// Limits its inner proposer to one drafted token per beam before every proposal.
struct DepthOne<'a>(&'a mut dyn Proposer);

impl Proposer for DepthOne<'_> {
    fn name(&self) -> &str {
        "depth-one"
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        self.0.wants_hidden()
    }

    fn propose(
        &mut self,
        ctx: &DraftContext<'_>,
    ) -> Result<draftsmith_core::DraftTree, draftsmith_decode::DecodeError> {
        assert_eq!(self.0.depth_range().map(|d| d >= 1), Some(true));
        self.0.limit_depth(1);
        self.0.propose(ctx)
    }
}
