//! TokenSwift heads: the chained residual formula by hand, export → import gives identical
//! logits with the reference's state-dict names, target checks, and a few optimiser steps fit
//! a tiny shifted-token problem.

use burn::backend::{Autodiff, Flex};
use burn::module::Param;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use draftsmith_heads::redrafter::{save_redrafter, HeadKind, ReDrafterConfig};
use draftsmith_heads::tokenswift::{load_tokenswift, save_tokenswift, shifted_loss, TokenSwiftBatch, TokenSwiftConfig};
use draftsmith_heads::{drafter_kind, DrafterKind, HeadsError, TargetIdentity};

mod common;
use common::spread;

type B = Flex;
type AB = Autodiff<Flex>;

fn target(vocab: usize, hidden: usize) -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "cd".repeat(32), vocab_size: vocab, hidden_size: hidden }
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-tokenswift-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn values(t: Tensor<B, 2>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

#[test]
fn one_head_by_hand() {
    let dev = Default::default();
    let mut heads = TokenSwiftConfig::new(5, 2).with_num_heads(1).with_rms_norm_eps(1e-12).init::<B>(&dev, 0);
    // W = [[1, 0], [0, 2]] (y = x·W in burn's [in, out] layout), input norm weight [1, 1], post norm weight [2, 1].
    heads.heads[0].linear.weight =
        Param::from_tensor(Tensor::from_data(TensorData::new(vec![1.0f32, 0.0, 0.0, 2.0], [2, 2]), &dev));
    heads.heads[0].post_norm.gamma =
        Param::from_tensor(Tensor::from_data(TensorData::new(vec![2.0f32, 1.0], [2]), &dev));
    // h0 = [3, 4]: rms = √12.5, RMSNorm(h0) = [0.8485, 1.1314]; W·that = [0.8485, 2.2627];
    // h1 = [3.8485, 6.2627]; rms(h1) = 5.1977; post = [2·0.7404, 1.2049] = [1.4808, 1.2049].
    let h0 = Tensor::<B, 2>::from_data(TensorData::new(vec![3.0f32, 4.0], [1, 2]), &dev);
    let state = values(heads.states(h0.clone()).remove(0));
    let want = [1.4808f32, 1.2049];
    assert!(state.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-3), "{state:?} vs {want:?}");
    // Logits through an LM head [hidden = 2, vocab = 5].
    let lm = Tensor::<B, 2>::from_data(
        TensorData::new(vec![1.0f32, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 1.0, 0.0, -1.0], [2, 5]),
        &dev,
    );
    let logits = values(heads.logits(h0, &lm).remove(0));
    let want = [1.4808f32, 1.2049, 2.6857, 2.9616, -1.2049];
    assert!(logits.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-3), "{logits:?}");
}

#[test]
fn heads_started_from_the_final_norm_reproduce_the_targets_next_token_state() {
    let dev = Default::default();
    let cfg = TokenSwiftConfig::new(5, 2).with_num_heads(2).with_rms_norm_eps(1e-12);
    let final_norm = Tensor::<B, 1>::from_data(TensorData::new(vec![2.0f32, 0.5], [2]), &dev);
    let mut heads = cfg.init_with_post_norm::<B>(&dev, 4, Some(final_norm));
    // Same linear draws as the reference initialisation with the same seed.
    let reference = cfg.init::<B>(&dev, 4);
    assert_eq!(values(heads.heads[1].linear.weight.val()), values(reference.heads[1].linear.weight.val()));
    assert_eq!(reference.heads[0].post_norm.gamma.val().into_data().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    // With the linear layers at zero every head's state is the target's final norm of h0:
    // h0 = [3, 4], rms = √12.5 → [0.8485 · 2, 1.1314 · 0.5].
    for head in &mut heads.heads {
        head.linear.weight = Param::from_tensor(Tensor::zeros([2, 2], &dev));
    }
    let h0 = Tensor::<B, 2>::from_data(TensorData::new(vec![3.0f32, 4.0], [1, 2]), &dev);
    for state in heads.states(h0) {
        let state = values(state);
        assert!((state[0] - 1.6971).abs() < 1e-3 && (state[1] - 0.5657).abs() < 1e-3, "{state:?}");
    }
}

#[test]
fn export_import_gives_identical_logits_and_reference_names() {
    let dev = Default::default();
    let cfg = TokenSwiftConfig::new(30, 8).with_num_heads(3).with_rms_norm_eps(1e-5);
    let heads = cfg.init::<B>(&dev, 7);
    let lm = Tensor::<B, 2>::random([8, 30], Distribution::Normal(0.0, 1.0), &dev);
    let h0 = Tensor::<B, 2>::random([4, 8], Distribution::Normal(0.0, 1.0), &dev);
    let before: Vec<Vec<f32>> = heads.logits(h0.clone(), &lm).into_iter().map(values).collect();
    let dir = tmpdir("rt");
    save_tokenswift(&dir, &heads, &cfg, &target(30, 8), serde_json::json!({"steps": 0})).unwrap();
    assert_eq!(drafter_kind(&dir).unwrap(), DrafterKind::TokenSwift);
    let (back, file) = load_tokenswift::<B>(&dir, Some(&target(30, 8)), &dev).unwrap();
    assert_eq!(file.config(), cfg);
    let after: Vec<Vec<f32>> = back.logits(h0, &lm).into_iter().map(values).collect();
    assert_eq!(after, before, "bit-identical logits after a round trip");

    let bytes = std::fs::read(dir.join("drafter.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let mut expected: Vec<String> = (0..3)
        .flat_map(|i| {
            ["input_layernorm.weight", "linear.weight", "post_layernorm.weight"]
                .map(|n| format!("model.medusa_layers.{i}.{n}"))
        })
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(st.tensor("model.medusa_layers.0.linear.weight").unwrap().shape(), &[8, 8]);

    // Another target, another shape, a ReDrafter directory: each refused with the file named.
    let other = TargetIdentity { sha256: "ef".repeat(32), ..target(30, 8) };
    match load_tokenswift::<B>(&dir, Some(&other), &dev) {
        Err(HeadsError::TargetMismatch { path, .. }) => assert!(path.ends_with("config.json")),
        other => panic!("expected a target mismatch, got {other:?}"),
    }
    assert!(matches!(load_tokenswift::<B>(&dir, Some(&target(31, 8)), &dev), Err(HeadsError::Incompatible(_))));
    let rd = tmpdir("redrafter");
    let rcfg = ReDrafterConfig::for_target(30, 8, HeadKind::Tied);
    save_redrafter(&rd, &rcfg.init::<B>(&dev, 0), &rcfg, &target(30, 8), None, serde_json::Value::Null).unwrap();
    let err = load_tokenswift::<B>(&rd, None, &dev).unwrap_err().to_string();
    assert!(err.contains("config.json") && err.contains("redrafter"), "{err}");
}

#[test]
fn a_few_steps_fit_a_shifted_token_problem() {
    let dev = Default::default();
    let (vocab, hidden, rows) = (16, 8, 12);
    let cfg = TokenSwiftConfig::new(vocab, hidden).with_num_heads(2);
    let mut heads = cfg.init::<AB>(&dev, 3);
    // Fixed inputs: burn's unseeded `Tensor::random` made this test pass or fail by the draw
    // (head 1 top-1 exactly 0.5 in one CI run).
    let lm = Tensor::<AB, 2>::from_data(TensorData::new(spread(hidden * vocab, 11), [hidden, vocab]), &dev);
    let h = Tensor::<AB, 2>::from_data(TensorData::new(spread(rows * hidden, 12), [rows, hidden]), &dev);
    let label = |k: i32| {
        Tensor::<AB, 1, Int>::from_data(
            TensorData::new((0..rows as i32).map(|r| (r * k) % vocab as i32).collect::<Vec<_>>(), [rows]),
            &dev,
        )
    };
    // The second head's last two rows have no label (past the end of the sequence).
    let mut w2 = vec![1.0f32; rows];
    w2[rows - 2..].fill(0.0);
    let batch = TokenSwiftBatch {
        hidden: h,
        labels: vec![label(3), label(5)],
        weights: vec![Tensor::ones([rows], &dev), Tensor::from_data(TensorData::new(w2, [rows]), &dev)],
    };
    let (first, metrics) = shifted_loss(&heads, &lm, &batch);
    assert_eq!(metrics.iter().map(|m| m.count).collect::<Vec<_>>(), vec![rows, rows - 2]);
    let first = first.into_scalar();
    let mut optim = AdamWConfig::new().init::<AB, _>();
    for _ in 0..60 {
        let (loss, _) = shifted_loss(&heads, &lm, &batch);
        let grads = GradientsParams::from_grads(loss.backward(), &heads);
        heads = optim.step(2e-2, heads, grads);
    }
    let (last, metrics) = shifted_loss(&heads, &lm, &batch);
    let last = last.into_scalar();
    assert!(last < 0.5 * first, "loss {first} → {last}");
    assert!(metrics[0].top1_acc() > 0.5, "head 1 top-1 {}", metrics[0].top1_acc());
}
