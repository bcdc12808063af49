//! Continuous batching gives every prompt exactly what generating it alone gives: greedy and
//! seeded sampling, prompts of different lengths, stop tokens that end some sequences early
//! (their slots are dropped and new prompts take their place), any batch width.

mod common;

use common::{tiny, Lcg};
use draftsmith_decode::batch::generate_batch;
use draftsmith_decode::{generate, Sampler, SamplingConfig, StopReason};
use draftsmith_model::Architecture;

#[test]
fn batched_generations_equal_one_at_a_time() {
    for (arch, seed) in [(Architecture::Llama, 11), (Architecture::Qwen2, 12)] {
        let model = tiny(arch, seed);
        let vocab = model.config().vocab_size;
        let mut rng = Lcg(seed);
        let prompts: Vec<Vec<u32>> =
            (0..7).map(|_| (0..1 + rng.next(12)).map(|_| rng.next(vocab) as u32).collect()).collect();
        // Two common tokens as stop tokens, so some sequences end early and others run to the cap.
        let stops = [3u32, 17];
        for sampling in
            [SamplingConfig::default(), SamplingConfig { temperature: 0.8, top_k: 10, ..Default::default() }]
        {
            let sampler = |i: usize| Sampler::new(SamplingConfig { seed: 100 + i as u64, ..sampling.clone() });
            let alone: Vec<_> = prompts
                .iter()
                .enumerate()
                .map(|(i, p)| generate(&model, p, 20, &stops, &mut sampler(i), &mut |_| true).unwrap())
                .collect();
            let stops_seen: Vec<StopReason> = alone.iter().map(|g| g.stop).collect();
            assert!(
                stops_seen.contains(&StopReason::MaxTokens),
                "{arch:?}: some sequence runs to the cap: {stops_seen:?}"
            );
            for width in [1, 2, 3, 7, 16] {
                let mut samplers: Vec<Sampler> = (0..prompts.len()).map(sampler).collect();
                let mut order = Vec::new();
                let batched =
                    generate_batch(&model, &prompts, &mut samplers, 20, &stops, width, &mut |i, _| order.push(i))
                        .unwrap();
                for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
                    assert_eq!(
                        (&a.tokens, a.stop),
                        (&b.tokens, b.stop),
                        "{arch:?} width {width} prompt {i} ({sampling:?})"
                    );
                }
                order.sort_unstable();
                assert_eq!(order, (0..prompts.len()).collect::<Vec<_>>(), "on_done once per prompt");
            }
        }
    }
}

#[test]
fn a_prompt_that_fills_the_context_is_refused() {
    let model = tiny(Architecture::Llama, 13);
    let long = vec![1u32; model.config().max_position_embeddings];
    let mut samplers = vec![Sampler::new(SamplingConfig::default()), Sampler::new(SamplingConfig::default())];
    let err = generate_batch(&model, &[vec![1, 2], long], &mut samplers, 4, &[], 2, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
}

#[test]
fn zero_new_tokens_generate_nothing_on_every_path() {
    let model = tiny(Architecture::Llama, 14);
    let prompt = vec![5u32, 9, 2, 5, 9];
    let greedy = || Sampler::new(SamplingConfig::default());
    let alone = generate(&model, &prompt, 0, &[], &mut greedy(), &mut |_| panic!("no token")).unwrap();
    assert_eq!((alone.tokens.len(), alone.stop), (0, StopReason::MaxTokens));
    assert_eq!(alone.decode_tokens_per_s(), 0.0);
    let mut lookup = draftsmith_decode::methods::PromptLookup::new(2, 1, 4);
    let spec = draftsmith_decode::generate_speculative(&model, &prompt, 0, &[], &mut lookup).unwrap();
    assert_eq!((spec.tokens.len(), spec.steps.len(), spec.stop), (0, 0, StopReason::MaxTokens));
    let prompts = vec![prompt.clone(), vec![1, 2, 3]];
    let mut samplers = vec![greedy(), greedy()];
    let mut finished = Vec::new();
    let batched =
        generate_batch(&model, &prompts, &mut samplers, 0, &[], 2, &mut |i, g| finished.push((i, g.clone()))).unwrap();
    assert!(batched.iter().all(|g| g.tokens.is_empty() && g.stop == StopReason::MaxTokens), "{batched:?}");
    assert_eq!(finished.iter().map(|f| f.0).collect::<Vec<_>>(), [0, 1], "on_done once per prompt");
    // A prompt that leaves no room is still refused.
    let long = vec![1u32; model.config().max_position_embeddings];
    assert!(generate(&model, &long, 0, &[], &mut greedy(), &mut |_| true).is_err());
}
