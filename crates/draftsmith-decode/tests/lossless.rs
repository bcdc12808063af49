//! Greedy speculative decoding reproduces autoregressive greedy decoding token for token, on a
//! tiny random model, for random prompts and method parameters, including trees that contain
//! the right continuation at random depths among wrong siblings.

mod common;

use common::{ar, tiny, tiny_keys, tiny_with, Lcg};
use draftsmith_core::DraftTree;
use draftsmith_decode::methods::{NgramTrie, NgramTrieConfig, PromptLookup};
use draftsmith_decode::{generate_speculative, DecodeError, DraftContext, Proposer};
use draftsmith_model::{Activations, Architecture, KvKeys, Model};

/// Knows the AR continuation and drafts trees that contain a random-length prefix of it,
/// with random wrong siblings and children.
struct Oracle {
    reference: Vec<u32>,
    rng: Lcg,
    vocab: usize,
}

impl Proposer for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, DecodeError> {
        let done = ctx.tokens.len();
        let mut tree = DraftTree::new();
        let depth = self.rng.next(6);
        let mut parent = None;
        for d in 0..depth {
            for _ in 0..self.rng.next(3) {
                tree.push(self.rng.next(self.vocab) as u32, parent);
            }
            let Some(&right) = self.reference.get(done + d) else { break };
            // Sometimes put a wrong token on the main line so acceptance stops early.
            let token = if self.rng.next(5) == 0 { (right + 1) % self.vocab as u32 } else { right };
            parent = Some(tree.push(token, parent));
        }
        Ok(tree)
    }
}

#[test]
fn speculative_equals_autoregressive() {
    let mut rng = Lcg(99);
    // Both activation modes of the quantized path are batch-invariant, so both are lossless;
    // so are 8-bit keys (every row's scores are its own int8 products).
    let cases = [(Architecture::Llama, 1), (Architecture::Qwen2, 2)].into_iter().flat_map(|(a, s)| {
        [
            (a, s, Activations::Int8, KvKeys::Float),
            (a, s, Activations::F32, KvKeys::Float),
            (a, s, Activations::Int8, KvKeys::Q8_0),
        ]
    });
    for (arch, seed, activations, kv_keys) in cases {
        let model: Model<common::B> =
            if kv_keys == KvKeys::Q8_0 { tiny_keys(arch, seed, kv_keys) } else { tiny_with(arch, seed, activations) };
        let vocab = model.config().vocab_size;
        for trial in 0..6 {
            // Prompts with repeats so prompt lookup finds matches.
            let base: Vec<u32> = (0..4 + rng.next(8)).map(|_| rng.next(vocab) as u32).collect();
            let prompt: Vec<u32> = base.iter().chain(&base).chain(&base[..base.len() / 2]).copied().collect();
            let n = 20 + rng.next(30);
            let want = ar(&model, &prompt, n);
            let mut full = prompt.clone();
            full.extend(&want);
            let mut oracle = Oracle { reference: full, rng: Lcg(trial), vocab };
            let got = generate_speculative(&model, &prompt, n, &[], &mut oracle).unwrap();
            assert_eq!(got.tokens, want, "{arch:?} {activations:?} {kv_keys:?} trial {trial}: oracle trees");
            let accepted: usize = got.steps.iter().map(|s| s.accepted).sum();
            assert!(accepted > 0, "the oracle's drafts are accepted sometimes");
            let mut lookup = PromptLookup::new(1 + rng.next(3), 1, 1 + rng.next(8));
            let got = generate_speculative(&model, &prompt, n, &[], &mut lookup).unwrap();
            assert_eq!(
                got.tokens, want,
                "{arch:?} {activations:?} {kv_keys:?} trial {trial}: prompt lookup {lookup:?}"
            );
            let emitted: usize = got.steps.iter().map(|s| s.emitted).sum();
            assert_eq!(emitted + 1, want.len(), "every token after the first comes from a step");
        }
    }
}

#[test]
fn stops_at_eos_inside_an_accepted_draft() {
    let model = tiny(Architecture::Llama, 5);
    let prompt: Vec<u32> = vec![3, 4, 5, 3, 4, 5, 3, 4];
    let want = ar(&model, &prompt, 30);
    let eos = want[7];
    let cut = want.iter().position(|&t| t == eos).unwrap() + 1;
    let mut full = prompt.clone();
    full.extend(&want);
    let mut oracle = Oracle { reference: full, rng: Lcg(1), vocab: 48 };
    let got = generate_speculative(&model, &prompt, 30, &[eos], &mut oracle).unwrap();
    assert_eq!(got.tokens, want[..cut].to_vec());
}

#[test]
fn ngram_trie_equals_autoregressive() {
    let mut rng = Lcg(2024);
    for (arch, seed) in [(Architecture::Llama, 3), (Architecture::Qwen2, 4)] {
        let mut accepted_total = 0;
        let model = tiny(arch, seed);
        let vocab = model.config().vocab_size;
        for trial in 0..6 {
            // A small alphabet and a repeated block make the context overlap with itself.
            let alphabet = 3 + rng.next(vocab - 3);
            let base: Vec<u32> = (0..4 + rng.next(10)).map(|_| rng.next(alphabet) as u32).collect();
            let prompt: Vec<u32> = base.iter().chain(&base).chain(&base[..1 + base.len() / 2]).copied().collect();
            let n = 20 + rng.next(30);
            let want = ar(&model, &prompt, n);
            let prefix_len = 1 + rng.next(4);
            let config = NgramTrieConfig {
                n: prefix_len + 1 + rng.next(14),
                prefix_len,
                num_draft: 1 + rng.next(40),
                max_depth: if rng.next(3) == 0 { Some(1 + rng.next(6)) } else { None },
                update_with_output: rng.next(2) == 0,
            };
            let mut trie = NgramTrie::new(config).unwrap();
            let got = generate_speculative(&model, &prompt, n, &[], &mut trie).unwrap();
            assert_eq!(got.tokens, want, "{arch:?} trial {trial}: {config:?}");
            assert!(got.steps.iter().all(|s| s.tree_size <= config.num_draft), "at most num_draft nodes");
            accepted_total += got.steps.iter().map(|s| s.accepted).sum::<usize>();
        }
        assert!(accepted_total > 0, "{arch:?}: some n-gram trie drafts are accepted");
    }
}

/// A drafter that fails on its third call.
struct Failing(usize);

impl Proposer for Failing {
    fn name(&self) -> &str {
        "failing"
    }

    fn propose(&mut self, _ctx: &DraftContext<'_>) -> Result<DraftTree, DecodeError> {
        self.0 += 1;
        match self.0 {
            3 => Err(DecodeError::Drafter("drafter forward failed".into())),
            _ => Ok(DraftTree::new()),
        }
    }
}

#[test]
fn a_drafter_error_ends_the_generation_instead_of_falling_back_to_ar() {
    let model = tiny(Architecture::Llama, 3);
    let err = generate_speculative(&model, &[1, 2, 3], 16, &[], &mut Failing(0)).unwrap_err();
    assert!(err.to_string().contains("drafter forward failed"), "{err}");
}

/// Wrappers that add branches to an inner proposer's tree (Post-use's token cache, the copied
/// context) run to the context's end: near it the driver drops drafts deeper than the room
/// left, and the inner proposer is told of the empty tree it verified.
#[test]
fn wrapped_proposers_run_to_the_context_limit() {
    use draftsmith_decode::methods::{CopyContext, TokenCache, TokenCacheConfig, WithCopy};
    let model = tiny(Architecture::Llama, 5);
    let limit = model.config().max_position_embeddings;
    // A prompt that repeats itself, so that prompt lookup keeps drafting long copies.
    let prompt: Vec<u32> = (0..limit / 2).map(|i| (i % 7) as u32 + 3).collect();
    let expected = ar(&model, &prompt, limit);
    let lookup = || PromptLookup::new(3, 1, 10);
    let proposers: Vec<Box<dyn Proposer>> = vec![
        Box::new(TokenCache::new(lookup(), TokenCacheConfig::default()).unwrap()),
        Box::new(WithCopy::new(Box::new(lookup()), CopyContext { max_ngram: 3, len: 10 })),
    ];
    for mut p in proposers {
        let out = generate_speculative(&model, &prompt, limit, &[], p.as_mut()).unwrap();
        assert_eq!(out.tokens, expected, "{}", p.name());
        assert_eq!(prompt.len() + out.tokens.len(), limit, "{} stops at the context's end", p.name());
    }
}
