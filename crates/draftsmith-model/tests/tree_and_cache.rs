//! Engine properties on a tiny random model: a branch verified inside a flattened tree has the
//! logits it has when run alone, and cache truncate/keep followed by more decoding equals
//! recomputing from scratch.

mod common;

use common::*;
use draftsmith_model::{Architecture, AttentionMask, LogitsSelect, Model};

const TOL: f32 = 1e-4;

fn run_all(model: &Model<B>, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(64);
    let pos: Vec<usize> = (0..tokens.len()).collect();
    to_vec(model.forward(tokens, &pos, &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap().logits)
}

#[test]
fn tree_branch_logits_equal_the_branch_run_alone() {
    for arch in [Architecture::Llama, Architecture::Qwen2] {
        let d = worst_tree_vs_alone(&tiny_model(arch, 11), &mut Lcg(5), 8, 14);
        assert!(d < TOL, "{arch:?}: max |Δlogit| {d}");
    }
}

#[test]
fn truncate_then_continue_equals_recompute() {
    let model = tiny_model(Architecture::Llama, 3);
    let vocab = model.config().vocab_size;
    let tokens: Vec<u32> = (0..20).map(|i| (i * 7 % vocab) as u32).collect();
    let full = run_all(&model, &tokens);
    let mut cache = model.new_cache(4); // small on purpose: the cache must grow
    let pos: Vec<usize> = (0..12).collect();
    model.forward_hidden(&tokens[..12], &pos, &AttentionMask::Causal, &mut cache).unwrap();
    // Feed junk, roll it back, then continue with the real tokens one at a time.
    model.forward_hidden(&[1, 2, 3], &[12, 13, 14], &AttentionMask::Causal, &mut cache).unwrap();
    cache.truncate(12);
    for i in 12..20 {
        let out =
            model.forward(&tokens[i..i + 1], &[i], &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap();
        let d = max_abs_diff(&to_vec(out.logits), &full[i * vocab..(i + 1) * vocab]);
        assert!(d < TOL, "position {i}: max |Δlogit| {d}");
    }
}

#[test]
fn keep_accepted_path_then_continue_equals_recompute() {
    let model = tiny_model(Architecture::Qwen2, 9);
    let vocab = model.config().vocab_size;
    let mut rng = Lcg(17);
    for _ in 0..6 {
        let prefix: Vec<u32> = (0..5).map(|_| rng.next(vocab) as u32).collect();
        let tree = random_tree(&mut rng, 10, vocab);
        let mut cache = model.new_cache(16);
        model.forward_hidden(&prefix, &[0, 1, 2, 3, 4], &AttentionMask::Causal, &mut cache).unwrap();
        let mask = AttentionMask::Visible(tree.visibility(prefix.len()));
        model.forward_hidden(tree.tokens(), &tree.positions(prefix.len() - 1), &mask, &mut cache).unwrap();
        // Accept the path to a random node: keep the prefix and that path's entries.
        let path = tree.path_to(rng.next(tree.len()));
        let keep: Vec<usize> = (0..prefix.len()).chain(path.iter().map(|&i| prefix.len() + i)).collect();
        cache.keep(&keep).unwrap();
        let mut seq = prefix.clone();
        seq.extend(path.iter().map(|&i| tree.tokens()[i]));
        assert_eq!(cache.len(), seq.len());
        let next = rng.next(vocab) as u32;
        let out = model.forward(&[next], &[seq.len()], &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap();
        seq.push(next);
        let full = run_all(&model, &seq);
        let d = max_abs_diff(&to_vec(out.logits), &full[(seq.len() - 1) * vocab..]);
        assert!(d < TOL, "max |Δlogit| {d}");
    }
}

#[test]
fn keep_rejects_unsorted_or_out_of_range_indices() {
    let model = tiny_model(Architecture::Llama, 1);
    let mut cache = model.new_cache(8);
    model.forward_hidden(&[1, 2, 3], &[0, 1, 2], &AttentionMask::Causal, &mut cache).unwrap();
    assert!(cache.keep(&[0, 2, 1]).unwrap_err().to_string().contains("strictly increasing"));
    assert!(cache.keep(&[0, 3]).unwrap_err().to_string().contains("beyond the cache length"));
}

#[test]
fn hidden_states_are_consistent_with_logits() {
    let model = tiny_model(Architecture::Llama, 2);
    let mut cache = model.new_cache(8);
    let out = model.forward(&[4, 5, 6], &[0, 1, 2], &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap();
    let again = to_vec(model.logits_from_prenorm(out.hidden_prenorm.clone()));
    assert!(max_abs_diff(&again, &to_vec(out.logits)) < 1e-5);
    assert_ne!(to_vec(out.hidden_prenorm), to_vec(out.hidden_final), "pre-norm and post-norm states differ");
}

#[test]
fn forward_rejects_bad_input() {
    let model = tiny_model(Architecture::Llama, 1);
    let mut cache = model.new_cache(8);
    let err =
        model.forward(&[1000], &[0], &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap_err().to_string();
    assert!(err.contains("outside the vocabulary"), "{err}");
    let err =
        model.forward(&[1], &[300], &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap_err().to_string();
    assert!(err.contains("exceeds the model's context"), "{err}");
    let err = model
        .forward(&[1, 2], &[0, 1], &AttentionMask::Visible(vec![true; 3]), LogitsSelect::All, &mut cache)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mask has 3 entries"), "{err}");
}

/// A cache doubles up to the model's context; a pass's slots past the context (a tree verified
/// at the end of a long generation) grow it by twice those slots, not by a whole context.
#[test]
fn a_cache_grows_by_doubling_up_to_the_context_and_by_the_pass_past_it() {
    for matmul in [draftsmith_model::MatmulWeights::Quantized, draftsmith_model::MatmulWeights::Dense] {
        let model = model_with(Architecture::Llama, 3, matmul);
        let context = model.config().max_position_embeddings;
        let mut cache = model.new_cache(context / 2 + 1);
        let d = model.config().num_kv_heads * model.config().head_dim;
        let rows = |n: usize| vec![0.5f32; n * d];
        cache.write_rows(0, context / 2, &rows(2), &rows(2));
        assert_eq!(cache.capacity(), context, "{matmul:?}: doubling stops at the context");
        cache.set_len(context - 3);
        cache.write_rows(0, context - 3, &rows(10), &rows(10));
        assert_eq!(cache.capacity(), context + 20, "{matmul:?}: the context plus twice the pass's 10 slots");
        cache.write_rows(0, context - 2, &rows(12), &rows(12));
        assert_eq!(cache.capacity(), context + 20, "{matmul:?}: a later pass of that size fits");
    }
}

fn model_with(arch: Architecture, seed: u64, matmul: draftsmith_model::MatmulWeights) -> Model<B> {
    let config = tiny_config(arch);
    draftsmith_model::build_model::<B>(
        &config,
        &draftsmith_model::MemorySource::random(&config, seed),
        draftsmith_model::LoadOptions::new(matmul),
        &Default::default(),
    )
    .unwrap()
}

/// Rows copied between caches (in any slot order) give the logits of the original cache, on
/// both the host (quantized) and the burn (dense) attention paths; the last query of every
/// layer is captured on request.
#[test]
fn copied_rows_and_captured_queries() {
    for matmul in [draftsmith_model::MatmulWeights::Quantized, draftsmith_model::MatmulWeights::Dense] {
        let model = model_with(Architecture::Qwen2, 21, matmul);
        let c = model.config().clone();
        let tokens: Vec<u32> = (0..12).map(|i| (i * 5 + 1) as u32 % c.vocab_size as u32).collect();
        let mut full = model.new_cache(4);
        full.capture_queries(true);
        let pos: Vec<usize> = (0..tokens.len()).collect();
        let want =
            to_vec(model.forward(&tokens, &pos, &AttentionMask::Causal, LogitsSelect::Last, &mut full).unwrap().logits);
        let queries = full.last_queries().unwrap().to_vec();
        assert_eq!(queries.len(), c.num_layers);
        assert!(queries.iter().all(|q| q.len() == c.num_heads * c.head_dim && q.iter().any(|&x| x != 0.0)));

        // The first 11 rows copied in reverse slot order, then the last token fed: same logits
        // (attention does not depend on slot order; positions live in the rotated keys).
        let mut copy = model.new_cache(2);
        let n = tokens.len() - 1;
        for layer in 0..c.num_layers {
            for slot in 0..n {
                let (k, v) = full.read_rows(layer, n - 1 - slot, 1);
                copy.write_rows(layer, slot, &k, &v);
            }
        }
        copy.set_len(n);
        let got = to_vec(
            model.forward(&tokens[n..], &[n], &AttentionMask::Causal, LogitsSelect::Last, &mut copy).unwrap().logits,
        );
        let d = max_abs_diff(&want, &got);
        assert!(d < TOL, "{matmul:?}: max |Δlogit| {d}");

        // read_rows layout: [kv_heads, count, head_dim]; a two-row read matches two one-row reads.
        let (k2, _) = full.read_rows(0, 3, 2);
        let (a, _) = full.read_rows(0, 3, 1);
        let (b, _) = full.read_rows(0, 4, 1);
        let d = c.head_dim;
        for head in 0..c.num_kv_heads {
            assert_eq!(&k2[(head * 2) * d..(head * 2 + 1) * d], &a[head * d..(head + 1) * d]);
            assert_eq!(&k2[(head * 2 + 1) * d..(head * 2 + 2) * d], &b[head * d..(head + 1) * d]);
        }
    }
}
