//! The benchmark on a tiny random model: every field is filled and the curve covers every
//! (context, shape, size) that fits (timings themselves are not asserted).

use burn::backend::Flex;
use draftsmith_model::{build_model, Activations, Architecture, LoadOptions, MemorySource, ModelConfig};

use super::*;

fn config() -> BenchConfig {
    BenchConfig {
        max_new_tokens: 4,
        prompts: 2,
        tree_size: 8,
        curve_sizes: vec![2, 4],
        contexts: vec![16, 510],
        curve_runs: 1,
        vs_llamacpp: false,
        repeats: None,
    }
}

#[test]
fn a_tiny_model_fills_every_field_and_skips_contexts_that_do_not_fit() {
    // The timed drafts use token ids from 100 up.
    let c = ModelConfig { vocab_size: 256, ..ModelConfig::tiny(Architecture::Llama) };
    let options = LoadOptions::new(MatmulWeights::Quantized).with_activations(Activations::Int8);
    let model = build_model::<Flex>(&c, &MemorySource::random(&c, 1), options, &Default::default()).unwrap();
    let prompts = vec![vec![1, 2, 3], vec![4, 5, 6, 7]];
    let (mut skipped, mut machines) = (Vec::new(), 0);
    let target = BenchTarget {
        model: &model,
        path: std::path::Path::new("tiny"),
        device: "cpu",
        weights: MatmulWeights::Quantized,
    };
    let result = bench_ar(target, &prompts, &config(), &mut |e| match e {
        BenchEvent::CurveSkipped { context, .. } => skipped.push(context),
        BenchEvent::Machine(_) => machines += 1,
        _ => {}
    })
    .unwrap();
    assert_eq!((skipped, machines), (vec![510], 1), "510 cached + 4 draft tokens exceed the context of 512");
    let sizes: Vec<(DraftShape, usize)> = result.verify_curve.iter().map(|p| (p.shape, p.n)).collect();
    let expected = [DraftShape::Chain, DraftShape::Tree].into_iter().flat_map(|s| [(s, 1), (s, 2), (s, 4)]);
    assert_eq!(sizes, expected.collect::<Vec<_>>(), "the 1-token step is added to the sizes");
    assert_eq!((result.prompts, result.repeats, result.prefill_len, result.tree_size), (2, 1, 511, 8));
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!((json["weights"].as_str(), json["activations"].as_str()), (Some("quantized"), Some("int8")));
    assert!(json.get("llamacpp").is_none() && json.get("decode_ratio_vs_llamacpp").is_none());
    assert!(json["verify_curve"][0].get("isa_roofline_over_step1").is_none(), "printed, not recorded");
    let recorded = ["matrices_ms", "roofline_ms"].map(|k| json["verify_curve"][0].get(k).is_some());
    assert_eq!(recorded, [true, true], "the quantized CPU path records its split and roofline");
    assert!(json["machine"]["read_bandwidth_gb_s"].as_f64().is_some_and(|b| b > 0.0));
    assert!(result.decode_tokens_per_s > 0.0 && result.step1_ms > 0.0);
}

#[test]
fn the_dense_path_records_no_roofline_and_no_split() {
    // Only the quantized CPU path times its parts, and the roofline models its host kernels: on
    // the dense path (any backend, a GPU among them) the curve is t(n) alone.
    let c = ModelConfig { vocab_size: 256, ..ModelConfig::tiny(Architecture::Llama) };
    let model = build_model::<Flex>(
        &c,
        &MemorySource::random(&c, 1),
        LoadOptions::new(MatmulWeights::Dense),
        &Default::default(),
    )
    .unwrap();
    let target =
        BenchTarget { model: &model, path: std::path::Path::new("tiny"), device: "cpu", weights: MatmulWeights::Dense };
    let cfg = BenchConfig { prompts: 1, contexts: vec![16], ..config() };
    let json = serde_json::to_value(bench_ar(target, &[vec![1, 2, 3]], &cfg, &mut |_| {}).unwrap()).unwrap();
    let point = &json["verify_curve"][0];
    assert!(point["ms"].as_f64().is_some() && point.get("matrices_ms").is_none() && point.get("roofline_ms").is_none());
    assert!(json["machine"]["cpu_model"].is_string() && json["machine"].get("read_bandwidth_gb_s").is_none());
    assert_eq!(json["activations"], "f32");
}

#[test]
fn settings_that_cannot_run_are_refused_up_front() {
    let err = BenchConfig { prompts: 9, ..config() }.validate().unwrap_err().to_string();
    assert_eq!(err, "--prompts must be between 1 and 8");
    let err = BenchConfig { contexts: vec![64, 0], ..config() }.validate().unwrap_err().to_string();
    assert!(err.starts_with("--contexts"), "{err}");
    assert_eq!(BenchConfig { vs_llamacpp: true, ..config() }.repeats(), 3);
    for (bad, flag) in [
        (BenchConfig { tree_size: 0, ..config() }, "--tree-size"),
        (BenchConfig { curve_sizes: vec![1, 0], ..config() }, "--curve-sizes"),
        (BenchConfig { curve_runs: 0, ..config() }, "--curve-runs"),
        (BenchConfig { repeats: Some(0), ..config() }, "--repeats"),
    ] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.starts_with(flag) && err.contains("at least 1"), "{err}");
    }
    for (bad, flag) in [
        (BenchConfig { curve_sizes: vec![2, 1, 2], ..config() }, "--curve-sizes"),
        (BenchConfig { contexts: vec![64, 64], ..config() }, "--contexts"),
    ] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.starts_with(flag) && err.contains("given twice"), "{err}");
    }
}

#[test]
fn sizes_the_models_context_cannot_hold_are_refused_by_flag() {
    // A context of 512: the random tree comes after 256 cached tokens.
    let err = BenchConfig { tree_size: 300, ..config() }.validate_for(512).unwrap_err().to_string();
    assert!(err.starts_with("--tree-size 300:") && err.contains("context of 512"), "{err}");
    let err = BenchConfig { contexts: vec![510, 600], ..config() }.validate_for(512).unwrap_err().to_string();
    assert!(err.starts_with("--contexts [510, 600]:"), "{err}");
    let err = BenchConfig { curve_sizes: vec![1, 2, 900], ..config() }.validate_for(512).unwrap_err().to_string();
    assert!(err.starts_with("--curve-sizes 900:"), "the draft, not the contexts, is named: {err}");
    assert!(config().validate_for(512).is_ok(), "one context fits; the other is skipped");
}
