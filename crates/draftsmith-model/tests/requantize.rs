//! `LoadOptions::with_requantize`: quantized weights stored in more bytes per value than the
//! asked format are re-quantized to it at load (a draft model's `--draft-weights`).

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use draftsmith_model::{
    build_model, Activations, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig, QFormat,
};

#[test]
fn weights_wider_than_the_asked_format_are_re_quantized_at_load() {
    let config = ModelConfig::tiny(Architecture::Qwen2);
    let source = MemorySource::random(&config, 5);
    let load = |format| {
        let options = LoadOptions::new(MatmulWeights::Quantized).with_requantize(format);
        build_model::<Flex>(&config, &source, options, &Default::default()).unwrap()
    };
    let (kept, q8, q4) = (load(None), load(Some(QFormat::Q8_0)), load(Some(QFormat::Q4_0)));
    // A source of f32 values gives Q8_0 matrices.
    let formats = [&kept, &q8, &q4].map(|m| m.lm_head_format());
    assert_eq!(formats, [Some(QFormat::Q8_0), Some(QFormat::Q8_0), Some(QFormat::Q4_0)]);
    let x = Tensor::<Flex, 2>::random([3, config.hidden_size], Distribution::Normal(0.0, 1.0), &Default::default());
    let logits = |m: &Model<Flex>| m.project_to_vocab(x.clone()).into_data().to_vec::<f32>().unwrap();
    let (a, b) = (logits(&kept), logits(&q4));
    assert_eq!(a, logits(&q8), "Q8_0 weights asked to be Q8_0 are kept");
    let scale = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let worst = a.iter().zip(&b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    // Q4_0 rounds each weight to 1/16 of its block's range, against Q8_0's 1/254.
    assert!(worst > 0.0 && worst <= 0.2 * scale, "Q4_0 head: worst logit change {worst} of {scale}");
}

#[test]
fn q4_0_with_f32_activations_means_q4_1() {
    let config = ModelConfig::tiny(Architecture::Llama);
    let source = MemorySource::random(&config, 6);
    let options = LoadOptions::new(MatmulWeights::Quantized)
        .with_activations(Activations::F32)
        .with_requantize(Some(QFormat::Q4_0));
    let model = build_model::<Flex>(&config, &source, options, &Default::default()).unwrap();
    assert_eq!(model.lm_head_format(), Some(QFormat::Q4_1), "Q4_0 has no fast kernel with f32 activations");
}
