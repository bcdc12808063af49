//! `Model::lm_head_rows`: the LM head restricted to some tokens gives those tokens' logits, in
//! the order asked — to f32 rounding for a dense head, within the rounding of the format the rows are re-quantized to
//! (Q8_0 or Q4_1) for a quantized one.

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use draftsmith_model::{build_model, Architecture, LoadOptions, MatmulWeights, MemorySource, ModelConfig, QFormat};

#[test]
fn rows_of_the_lm_head_match_the_full_head() {
    let config = ModelConfig::tiny(Architecture::Llama);
    let ids = [40u32, 3, 17, 0, 47];
    for matmul in [MatmulWeights::Dense, MatmulWeights::Quantized] {
        let model = build_model::<Flex>(
            &config,
            &MemorySource::random(&config, 21),
            LoadOptions::new(matmul),
            &Default::default(),
        )
        .unwrap();
        let x = Tensor::<Flex, 2>::random([3, config.hidden_size], Distribution::Normal(0.0, 1.0), &Default::default());
        let full: Vec<f32> = model.project_to_vocab(x.clone()).into_data().to_vec().unwrap();
        let scale = full.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // Q4_1 rounds each weight to 1/15 of its block's range, Q8_0 to 1/254 of twice its amax.
        for (format, rel) in [(QFormat::Q8_0, 0.02), (QFormat::Q4_1, 0.15)] {
            let rows = model.lm_head_rows(&ids, format).unwrap();
            let sub: Vec<f32> = rows.forward(x.clone()).into_data().to_vec().unwrap();
            assert_eq!(sub.len(), 3 * ids.len());
            for r in 0..3 {
                for (k, &t) in ids.iter().enumerate() {
                    let (a, b) = (full[r * config.vocab_size + t as usize], sub[r * ids.len() + k]);
                    let tol = if matches!(matmul, MatmulWeights::Dense) { 1e-5 * scale } else { rel * scale };
                    assert!((a - b).abs() <= tol, "{matmul:?} {format:?} row {r} token {t}: full {a} vs rows {b}");
                }
            }
        }
        let outside = model.lm_head_rows(&[config.vocab_size as u32], QFormat::Q8_0);
        assert!(outside.is_err(), "a token outside the vocabulary");
    }
}
